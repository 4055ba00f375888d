#include "config/params.h"

#include <gtest/gtest.h>

namespace mmserve {
namespace {

Params Make(nlohmann::json value) {
  auto locations = std::make_shared<Params::Locations>();
  (*locations)["m.params"] = {"f.yaml", 3, 5};
  (*locations)["m.params.n"] = {"f.yaml", 4, 10};
  return Params(std::move(value), "m.params", locations);
}

TEST(ParamsTest, ReadsTypedValuesWithDefaults) {
  ConfigErrors errors;
  Params p = Make({{"n", 3}, {"s", "x"}, {"b", true}, {"d", 0.5}});
  ParamReader r(p, errors);
  EXPECT_EQ(r.Int("n", 0, 0, 10), 3);
  EXPECT_EQ(r.Int("absent", 7, 0, 10), 7);
  EXPECT_EQ(r.String("s", ""), "x");
  EXPECT_TRUE(r.Bool("b", false));
  EXPECT_DOUBLE_EQ(r.Double("d", 0, 0, 1), 0.5);
  r.Finish();
  EXPECT_TRUE(errors.empty());
}

TEST(ParamsTest, ErrorsCarryTheNearestKnownPosition) {
  ConfigErrors errors;
  Params p = Make({{"n", 30}, {"extra", 1}});
  ParamReader r(p, errors);
  EXPECT_EQ(r.Int("n", 1, 0, 10), 1);  // the default on error
  r.Finish();
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors.errors()[0].ToString(),
            "f.yaml:4:10: m.params.n: expected an integer in 0..10, found 30");
  EXPECT_EQ(errors.errors()[1].ToString(),
            "f.yaml:3:5: m.params.extra: expected one of n, found unknown key \"extra\"");
}

}  // namespace
}  // namespace mmserve
