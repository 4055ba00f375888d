#include "server/http/route_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mmserve {
namespace {

using ::testing::ElementsAre;
namespace http = boost::beast::http;

RouteTable Table() {
  RouteTable t;
  for (const char* p : {"/v2/models/stats", "/v2/models/{}", "/v2/models/{}/versions/{}/infer",
                        "/ui/*", "/", "/v2/repository/models/{}/load"}) {
    t.Add({.pattern = p,
           .methods = {http::verb::get},
           .scope = std::string_view(p).find("repository") != std::string_view::npos
                        ? Scope::kAdmin
                        : Scope::kInference});
  }
  return t;
}

std::string PatternOf(const RouteTable& t, std::string_view path) {
  auto m = t.Find(path);
  return m ? m->route->pattern : "none";
}

TEST(RouteTableTest, LiteralsBeforeParametersInTheOrderAdded) {
  const RouteTable t = Table();
  EXPECT_EQ(PatternOf(t, "/v2/models/stats"), "/v2/models/stats");
  EXPECT_EQ(PatternOf(t, "/v2/models/resnet"), "/v2/models/{}");
  EXPECT_EQ(PatternOf(t, "/"), "/");
  EXPECT_EQ(PatternOf(t, "/v2/models"), "none");
  EXPECT_EQ(PatternOf(t, "/v2/models/a/b"), "none");
  EXPECT_EQ(PatternOf(t, "/ui"), "none") << "a rest takes at least one segment";
}

TEST(RouteTableTest, ParametersAndTheRestArePassedInOrder) {
  const RouteTable t = Table();
  auto m = t.Find("/v2/models/resnet/versions/3/infer");
  ASSERT_TRUE(m);
  EXPECT_THAT(m->args, ElementsAre("resnet", "3"));
  m = t.Find("/ui/js/status.js");
  ASSERT_TRUE(m);
  EXPECT_THAT(m->args, ElementsAre("js/status.js"));
}

TEST(RouteTableTest, TrailingAndDoubledSlashesAreIgnored) {
  const RouteTable t = Table();
  EXPECT_EQ(PatternOf(t, "/v2/models/stats/"), "/v2/models/stats");
  EXPECT_EQ(PatternOf(t, "//v2//models/m"), "/v2/models/{}");
}

TEST(RouteTableTest, TheScopeComesWithTheRoute) {
  const RouteTable t = Table();
  EXPECT_EQ(t.Find("/v2/repository/models/m/load")->route->scope, Scope::kAdmin);
  EXPECT_EQ(t.Find("/v2/models/m")->route->scope, Scope::kInference);
}

TEST(RouteTableTest, APathDeeperThanAnyRouteMatchesNothing) {
  const RouteTable t = Table();
  std::string deep;
  for (size_t i = 0; i <= RouteTable::kMaxSegments; ++i) deep += "/ui";
  EXPECT_FALSE(t.Find(deep)) << "split no deeper than kMaxSegments";
}

TEST(RouteTableTest, MethodsAreNamedForA405) {
  EXPECT_EQ(RouteTable::MethodsText({.methods = {http::verb::get}}), "GET");
  EXPECT_EQ(RouteTable::MethodsText({.methods = {http::verb::get, http::verb::delete_}}),
            "GET or DELETE");
}

}  // namespace
}  // namespace mmserve
