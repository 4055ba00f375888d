#include "server/http/request_policy.h"

#include <unistd.h>

#include <gtest/gtest.h>

namespace mmserve {
namespace {

namespace http = boost::beast::http;

HttpRequest Post(const std::string& host, const std::string& origin,
                 const std::string& content_type, const std::string& body = "{}") {
  HttpRequest req(http::verb::post, "/v2/repository/models/echo/unload", 11);
  if (!host.empty()) req.set(http::field::host, host);
  if (!origin.empty()) req.set(http::field::origin, origin);
  if (!content_type.empty()) req.set(http::field::content_type, content_type);
  req.body() = body;
  req.prepare_payload();
  return req;
}

int StatusOf(const RequestPolicy& policy, const HttpRequest& req) {
  auto refusal = policy.Refusal(req);
  return refusal ? static_cast<int>(refusal->result_int()) : 0;
}

TEST(RequestPolicyTest, HostMustNameThisServer) {
  const RequestPolicy policy({"mmserve.internal", ".svc.cluster.local"}, {});
  for (const char* host : {"127.0.0.1", "127.0.0.1:8000", "[::1]:8000", "10.1.2.3", "localhost",
                           "LOCALHOST:8000", "localhost.", "app.localhost:3000",
                           "mmserve.internal:8000", "mmserve.ns.svc.cluster.local",
                           "svc.cluster.local"}) {
    EXPECT_TRUE(policy.HostAllowed(host)) << host;
  }
  // A DNS-rebinding page's Host is the attacker's own name.
  for (const char* host : {"evil.example", "evil.example:8000", "localhost.evil.example",
                           "127.0.0.1.evil.example", "mmserve.internal.evil", "xsvc.cluster.local",
                           "", ":8000"}) {
    EXPECT_FALSE(policy.HostAllowed(host)) << host;
  }
  char name[256] = {};
  ASSERT_EQ(::gethostname(name, sizeof name - 1), 0);
  EXPECT_TRUE(policy.HostAllowed(std::string(name) + ":8000")) << "this machine's own name";
  EXPECT_TRUE(RequestPolicy({"*"}, {}).HostAllowed("anything.example"));
}

TEST(RequestPolicyTest, RefusesRebindingCrossOriginAndFormBodies) {
  const RequestPolicy policy({}, {"https://app.example"});
  EXPECT_EQ(StatusOf(policy, Post("127.0.0.1:8000", "", "application/json")), 0);
  EXPECT_EQ(StatusOf(policy, Post("", "", "application/json")), 0) << "HTTP/1.0, no Host";
  EXPECT_EQ(StatusOf(policy, Post("evil.example:8000", "http://evil.example:8000", "application/json")),
            403);
  // Same origin (the status page), an allowed origin, any other origin.
  EXPECT_EQ(StatusOf(policy, Post("127.0.0.1:8000", "http://127.0.0.1:8000", "application/json")), 0);
  EXPECT_EQ(StatusOf(policy, Post("127.0.0.1:8000", "https://app.example", "application/json")), 0);
  EXPECT_EQ(StatusOf(policy, Post("127.0.0.1:8000", "http://127.0.0.1:9999", "text/plain")), 403);
  EXPECT_EQ(StatusOf(policy, Post("127.0.0.1:8000", "null", "application/json")), 403);
  // Bodies a page can send without a preflight.
  for (const char* type : {"text/plain", "text/plain;charset=UTF-8",
                           "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"}) {
    auto refusal = policy.Refusal(Post("127.0.0.1", "", type));
    ASSERT_TRUE(refusal) << type;
    EXPECT_EQ(refusal->result_int(), 415u) << type;
    EXPECT_NE(refusal->body().find("application/json"), std::string::npos) << refusal->body();
  }
  for (const char* type : {"application/json", "Application/JSON; charset=utf-8",
                           "application/vnd.api+json", "application/octet-stream", "image/jpeg",
                           ""}) {
    EXPECT_EQ(StatusOf(policy, Post("127.0.0.1", "", type)), 0) << type;
  }
  EXPECT_EQ(StatusOf(policy, Post("127.0.0.1", "", "text/plain", "")), 0) << "no body";
}

TEST(RequestPolicyTest, CorsFieldsOnlyForAnAllowedOrigin) {
  const RequestPolicy policy({}, {"https://app.example"});
  http::fields fields;
  policy.AddCorsHeaders("https://evil.example", fields);
  EXPECT_EQ(fields.count(http::field::access_control_allow_origin), 0u);
  policy.AddCorsHeaders("https://app.example", fields);
  EXPECT_EQ(fields[http::field::access_control_allow_origin], "https://app.example");
  EXPECT_EQ(fields[http::field::vary], "Origin");
  http::fields any;
  RequestPolicy({}, {"*"}).AddCorsHeaders("https://x.example", any);
  EXPECT_EQ(any[http::field::access_control_allow_origin], "*");
}

}  // namespace
}  // namespace mmserve
