#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <ember/ember.h>

namespace ember::testing {

// torch.testing.assert_close's default tolerances for a dtype (exact for integers and bool).
struct Tolerance {
  double rtol, atol;
};
Tolerance default_tolerance(ScalarType t);

// Passes when |actual - expected| <= atol + rtol * |expected| everywhere (NaN matches NaN),
// shapes are equal and, unless check_dtype is false, dtypes too. The message names the worst
// element.
::testing::AssertionResult assert_close(const Tensor& actual, const Tensor& expected,
                                        std::optional<Tolerance> tol = std::nullopt, bool check_dtype = true);
#define EXPECT_CLOSE(actual, expected, ...) \
  EXPECT_TRUE(::ember::testing::assert_close((actual), (expected), ##__VA_ARGS__))

// A tensor's strides, to compare with a braced list: EXPECT_EQ(strides(t), (Strides{...})).
using Strides = std::vector<int64_t>;
inline Strides strides(const Tensor& t) { return t.strides().vec(); }

// t with NHWC memory (channels-last), indexed as before.
inline Tensor nhwc(const Tensor& t) { return t.contiguous(MemoryFormat::ChannelsLast); }

// Passes when t's strides are exactly the NHWC strides of its sizes: stricter than
// is_contiguous(MemoryFormat::ChannelsLast), which a [N, C, 1, 1] tensor with NCHW strides passes.
::testing::AssertionResult is_nhwc(const Tensor& t);

// Asserts that `stmt` throws ember::Error whose message contains every one of `parts`.
#define EXPECT_EMBER_ERROR(stmt, ...)                                     \
  do {                                                                    \
    try {                                                                 \
      stmt;                                                               \
      ADD_FAILURE() << "expected ember::Error from: " #stmt;              \
    } catch (const ::ember::Error& e) {                                   \
      for (const char* part : {__VA_ARGS__})                              \
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos)    \
            << "message \"" << e.what() << "\" lacks \"" << part << "\""; \
    }                                                                     \
  } while (0)

// Random tensor of `sizes` and `dtype` with values in [low, high) (integers: [low, high)).
Tensor random_tensor(IntArrayRef sizes, ScalarType dtype, double low = -2, double high = 2);

// The same values in a non-contiguous layout (a strided slice of a larger buffer).
Tensor non_contiguous(const Tensor& t);

// What a node that asks for its output gradient's row sums (BackwardExtras) receives: the
// gradient and, where the producer of that gradient computed them, the sums.
struct RowSumsSeen {
  Tensor grad, sums;
};
// h as it is, through a node that asks for those row sums and records what it gets in *seen; its
// rows row_stride apart (with_row_stride) when that is given.
Tensor asking_for_row_sums(const Tensor& h, RowSumsSeen* seen, int64_t row_stride = 0);
// t's values (no graph) in rows row_stride apart: padded, as a linear's output.
Tensor with_row_stride(const Tensor& t, int64_t row_stride);

// --- The op table (STYLE.md #7): every registered op has an entry; a generic test runs each
// entry's samples in several dtypes against the same op run in float64. ---
struct Sample {
  std::vector<Tensor> inputs;
  std::string desc;
};

struct OpEntry {
  std::string name;  // the op's name in the registry
  // Sample inputs for a dtype; float inputs are upcast to float64 for the reference run.
  std::function<std::vector<Sample>(ScalarType)> samples;
  std::function<Tensor(const std::vector<Tensor>&)> fn;
  std::vector<ScalarType> dtypes = {kFloat32, kFloat64, kFloat16, kBFloat16};
  // Extra slack over the dtype's default tolerance (accumulating ops in low precision).
  double tol_scale = 1;
};

std::vector<OpEntry>& op_table();
struct OpTableRegistrar {
  OpTableRegistrar(std::vector<OpEntry> entries);
};

// Samples from shape lists: each list is one call's input shapes. Adds a non-contiguous copy
// of the first case and keeps zero-size cases as given. Inputs are random in [low, high).
std::vector<Sample> samples_from_shapes(ScalarType dtype, std::vector<std::vector<DimVector>> shapes,
                                        double low = -2, double high = 2);

// Shape lists every elementwise op runs: same shape, broadcast, scalar, zero-size.
std::vector<std::vector<DimVector>> unary_shapes();
std::vector<std::vector<DimVector>> binary_shapes();

// --- The gradcheck table: every differentiable registered op has at least one case; each case
// runs gradcheck (and gradgradcheck when second_order) in float64, once with contiguous inputs
// and once with the first input non-contiguous. Cases with integer inputs (indices) build them
// inside fn. ---
struct GradcheckCase {
  std::string op;  // the op's name in the registry
  autograd::TensorFn fn;
  std::vector<DimVector> shapes;  // float64 inputs that require grad, random in [low, high)
  double low = -2, high = 2;
  bool second_order = false;
};

std::vector<GradcheckCase>& gradcheck_table();
struct GradcheckRegistrar {
  GradcheckRegistrar(std::vector<GradcheckCase> cases);
};

// One test per op-table entry (<op_suite>.<op>) and per gradcheck case (<grad_suite>.<op>, cases
// of one op numbered #2, #3...), run in a fixture of class Base (a CUDA suite skips without a
// GPU). Call from main() before RUN_ALL_TESTS().
template <class Base = ::testing::Test>
void register_table_tests(const char* op_suite, void (*run_op)(const OpEntry&), const char* grad_suite,
                          void (*run_grad)(const GradcheckCase&)) {
  struct Test : Base {
    std::function<void()> body;
    void TestBody() override { body(); }
  };
  auto add = [](const char* suite, const std::string& name, std::function<void()> body) {
    ::testing::RegisterTest(suite, name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [body = std::move(body)]() -> ::testing::Test* {
                              auto* t = new Test;
                              t->body = body;
                              return t;
                            });
  };
  for (const OpEntry& e : op_table()) add(op_suite, e.name, [&e, run_op] { run_op(e); });
  std::map<std::string, int> seen;
  for (const GradcheckCase& c : gradcheck_table()) {
    const int n = ++seen[c.op];
    add(grad_suite, n == 1 ? c.op : c.op + "#" + std::to_string(n), [&c, run_grad] { run_grad(c); });
  }
}

// A fresh folder under the system's temp dir, removed with everything in it at scope end.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const;      // path/name
  std::string new_file(const std::string& name) const;  // path/name, its folders created
  size_t count() const;                                 // the entries directly inside

 private:
  std::string path_;
};

// use_deterministic_algorithms(mode) until scope end, then the mode before.
class DeterministicMode {
 public:
  explicit DeterministicMode(bool mode, bool warn_only = false)
      : mode_(are_deterministic_algorithms_enabled()),
        warn_only_(is_deterministic_algorithms_warn_only_enabled()) {
    use_deterministic_algorithms(mode, warn_only);
  }
  ~DeterministicMode() { use_deterministic_algorithms(mode_, warn_only_); }
  DeterministicMode(const DeterministicMode&) = delete;
  DeterministicMode& operator=(const DeterministicMode&) = delete;

 private:
  bool mode_, warn_only_;
};

// Runs `program args` through the shell with stdout and stderr to `log`; returns the wait status.
int run_program(const std::string& program, const std::string& args, const std::string& log);
// A file's whole content ("" when it cannot be read).
std::string read_text(const std::string& path);

// The bad-input tables' rule: `call` (then `then`, a synchronization that raises a kernel's error)
// must throw an ember::Error whose message has one of the '|'-separated `names` followed by ':'.
// Returns what happened instead, or "" when it did.
std::string unlabelled_error(const std::function<void()>& call, const std::string& names,
                             const std::function<void()>& then = {});

}  // namespace ember::testing
