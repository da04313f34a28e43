#include "test_util.h"

namespace ember::testing {

TEST(OpRegistry, EveryOpHasATableEntry) {
  ASSERT_FALSE(registered_ops().empty());
  for (const OpSchema& op : registered_ops()) {
    bool found = false;
    for (const OpEntry& e : op_table()) found = found || e.name == op.name;
    EXPECT_TRUE(found) << "op '" << op.name << "' has no entry in the op table (tests/core/op_table_*.cpp)";
  }
}

TEST(OpRegistry, EveryTableEntryNamesARegisteredOp) {
  for (const OpEntry& e : op_table()) EXPECT_NE(find_op(e.name), nullptr) << e.name;
}

}  // namespace ember::testing
