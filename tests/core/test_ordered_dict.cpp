#include "test_util.h"

namespace ember::testing {

TEST(OrderedDict, KeepsInsertionOrderAndLooksUp) {
  OrderedDict<int> d;
  d.insert("b", 1);
  d.insert("a", 2);
  d.set("c", 3);
  d.set("b", 4);  // replaces in place, order unchanged
  EXPECT_EQ(d.keys(), (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(d.values(), (std::vector<int>{4, 2, 3}));
  EXPECT_EQ(d["a"], 2);
  EXPECT_TRUE(d.contains("c"));
  EXPECT_EQ(d.find("zz"), nullptr);
  EXPECT_EQ(d.size(), 3u);
}

TEST(OrderedDict, DuplicateAndMissingKeysThrow) {
  OrderedDict<int> d;
  d.insert("w", 1, "register_parameter");
  EXPECT_EMBER_ERROR(d.insert("w", 2, "register_parameter"), "register_parameter", "\"w\"", "already exists");
  EXPECT_EMBER_ERROR(d.at("q"), "no key \"q\"");
}

}  // namespace ember::testing
