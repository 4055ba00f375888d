// Runs tests/integration/clients/grpc_client.py (Debian's python3-grpcio, stubs generated from
// the project's .proto into `dir`) against a server's gRPC port; its JSON line.
#pragma once

#include <regex>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/paths.h"
#include "testing/test_util.h"

namespace mmserve::testing {

// The gRPC port a server logged ("grpc listening on 127.0.0.1:PORT"), or 0.
inline int GrpcPort(const std::string& log) {
  std::smatch m;
  static const std::regex kGrpc(R"(grpc listening on [0-9.]+:([0-9]+))");
  return std::regex_search(log, m, kGrpc) ? std::stoi(m[1].str()) : 0;
}

// `args`: an API key, or a mode and its arguments (see the client's usage).
inline nlohmann::json RunGrpcClient(const TempDir& dir, int port, const std::string& args = "") {
  const std::string source = SourceDir();
  const std::string stubs = (dir.path() / "stubs").string();
  auto [rc, out] = RunShell("mkdir -p " + stubs + " && protoc -I " + source +
                            "/src/server/grpc --python_out=" + stubs + " --grpc_python_out=" +
                            stubs +
                            " --plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin "
                            "grpc_service.proto 2>&1 && /usr/bin/python3 " + source +
                            "/tests/integration/clients/grpc_client.py " + std::to_string(port) +
                            " " + stubs + " " + args + " 2>&1");
  EXPECT_EQ(rc, 0) << out;
  const size_t start = out.find('{');
  auto seen = nlohmann::json::parse(start == std::string::npos ? out : out.substr(start), nullptr,
                                    false);
  EXPECT_FALSE(seen.is_discarded()) << out;
  return seen;
}

}  // namespace mmserve::testing
