// Test main: registers one test per op-table entry (OpTable.<op>) and per gradcheck case
// (Gradcheck.<op>), then runs everything.
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

// Dropping an op's output without a backward frees its recorded graph: no backward formula may
// own the op's own output (node -> output -> node is a cycle that leaks the graph and its saved
// tensors, as cross_entropy's did).
void expect_graph_freed_with_its_output(const autograd::TensorFn& fn, const std::vector<Tensor>& in) {
  std::vector<uint32_t> holders;
  for (const Tensor& t : in) holders.push_back(t.use_count());
  std::weak_ptr<Node> node;
  {
    Tensor out = fn(in);
    node = out.grad_fn();
  }
  EXPECT_TRUE(node.expired()) << "the output's grad_fn outlives it";
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(in[i].use_count(), holders[i]) << "input " << i << " is still held by a dropped graph";
  }
}

void run_gradcheck(const GradcheckCase& c) {
  for (bool non_contiguous_first : {false, true}) {
    SCOPED_TRACE(c.op + (non_contiguous_first ? " (first input non-contiguous)" : ""));
    manual_seed(7);
    std::vector<Tensor> in;
    for (size_t i = 0; i < c.shapes.size(); ++i) {
      Tensor t = random_tensor(c.shapes[i], kFloat64, c.low, c.high);
      if (i == 0 && non_contiguous_first) t = non_contiguous(t);
      in.push_back(t.requires_grad_());
    }
    try {
      expect_graph_freed_with_its_output(c.fn, in);
      EXPECT_TRUE(autograd::gradcheck(c.fn, in));
      if (c.second_order) {
        EXPECT_TRUE(autograd::gradgradcheck(c.fn, in));
      }
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

}  // namespace
}  // namespace ember::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  using namespace ember::testing;
  register_table_tests("OpTable", run_entry, "Gradcheck", run_gradcheck);
  return RUN_ALL_TESTS();
}
