// Test main: registers one test per op-table entry (OpTable.<op>), then runs everything.
#include "test_util.h"

namespace ember::testing {
namespace {

Tensor upcast(const Tensor& t) { return t.is_floating_point() ? t.to(kFloat64) : t; }

void run_entry(const OpEntry& e) {
  for (ScalarType dt : e.dtypes) {
    manual_seed(1234);
    for (const Sample& s : e.samples(dt)) {
      SCOPED_TRACE(e.name + " " + std::string(to_string(dt)) + " inputs " + s.desc);
      std::vector<Tensor> ref_in;
      for (const Tensor& t : s.inputs) ref_in.push_back(upcast(t));
      Tensor out = e.fn(s.inputs);
      Tensor ref = e.fn(ref_in);
      Tolerance tol = default_tolerance(out.is_floating_point() ? out.dtype() : kFloat64);
      if (!out.is_floating_point()) tol = {0, 0};
      tol.rtol *= e.tol_scale;
      tol.atol *= e.tol_scale;
      EXPECT_TRUE(assert_close(out, ref, tol, false));
      if (out.is_floating_point() && ref.is_floating_point() && is_floating_point(dt)) {
        EXPECT_EQ(out.dtype(), dt) << "the op should keep the input's floating dtype";
      }
    }
  }
}

class OpTableTest : public ::testing::Test {
 public:
  explicit OpTableTest(const OpEntry* e) : e_(e) {}
  void TestBody() override { run_entry(*e_); }

 private:
  const OpEntry* e_;
};

}  // namespace
}  // namespace ember::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (const auto& e : ember::testing::op_table()) {
    const auto* entry = &e;
    ::testing::RegisterTest("OpTable", e.name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [entry]() -> ::testing::Test* { return new ember::testing::OpTableTest(entry); });
  }
  return RUN_ALL_TESTS();
}
