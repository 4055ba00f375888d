// bare_grpc_server: the gRPC limit for the side-by-side benchmark of mmserve's gRPC frontend —
// a KServe v2 GRPCInferenceService whose ModelInfer answers every call with one fixed,
// pre-serialized ModelInferResponse (mmserve's own answer, saved by `loadgen --save-answer`)
// and does no other work. Built like mmserve's frontend: gRPC's callback API, the answer sent
// from the reactor. Prints "listening on PORT" once it serves.
//
//   bare_grpc_server --port 0 --response-file answer.pb
#include <fstream>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>

#include "grpc_service.grpc.pb.h"

namespace pb = inference;

namespace {

class BareService final : public pb::GRPCInferenceService::CallbackService {
 public:
  explicit BareService(pb::ModelInferResponse answer) : answer_(std::move(answer)) {}

  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const pb::ModelInferRequest*,
                                       pb::ModelInferResponse* response) override {
    *response = answer_;
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  const pb::ModelInferResponse answer_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"a gRPC ModelInfer server answering a fixed response, doing no work"};
  int port = 0;
  std::string response_file;
  app.add_option("--port", port);
  app.add_option("--response-file", response_file)->required();
  CLI11_PARSE(app, argc, argv);

  std::stringstream bytes;
  bytes << std::ifstream(response_file, std::ios::binary).rdbuf();
  pb::ModelInferResponse answer;
  if (!answer.ParseFromString(bytes.str())) {
    std::cerr << response_file << ": not a serialized ModelInferResponse\n";
    return 1;
  }
  BareService service(std::move(answer));
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                           &bound);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  if (!server || bound == 0) {
    std::cerr << "cannot listen on port " << port << "\n";
    return 1;
  }
  std::cout << "listening on " << bound << std::endl;
  server->Wait();
  return 0;
}
