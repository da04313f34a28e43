#include "test_util.h"

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ember::testing {

Tolerance default_tolerance(ScalarType t) {
  switch (t) {
    case kFloat32:
      return {1.3e-6, 1e-5};
    case kFloat64:
      return {1e-7, 1e-7};
    case kFloat16:
      return {1e-3, 1e-5};
    case kBFloat16:
      return {1.6e-2, 1e-5};
    default:
      return {0, 0};
  }
}

::testing::AssertionResult is_nhwc(const Tensor& t) {
  if (t.strides().equals(channels_last_strides("is_nhwc", t.sizes()))) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "strides " << t.strides() << " of sizes " << t.sizes() << " are not channels-last";
}

::testing::AssertionResult assert_close(const Tensor& actual, const Tensor& expected,
                                        std::optional<Tolerance> tol, bool check_dtype) {
  if (!actual.sizes().equals(expected.sizes())) {
    std::ostringstream os;
    os << "shape mismatch: actual " << actual.sizes() << ", expected " << expected.sizes();
    return ::testing::AssertionFailure() << os.str();
  }
  if (check_dtype && actual.dtype() != expected.dtype())
    return ::testing::AssertionFailure()
           << "dtype mismatch: actual " << actual.dtype() << ", expected " << expected.dtype();
  Tolerance t = tol.value_or(default_tolerance(actual.dtype()));
  Tensor a = actual.cpu().to(kFloat64).contiguous(), e = expected.cpu().to(kFloat64).contiguous();
  const double* pa = a.data_ptr<double>();
  const double* pe = e.data_ptr<double>();
  int64_t bad = 0, worst = -1;
  double worst_excess = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = pa[i], y = pe[i];
    if (std::isnan(x) && std::isnan(y)) continue;
    if (x == y) continue;  // equal infinities
    double allowed = t.atol + t.rtol * std::fabs(y);
    double diff = std::fabs(x - y);
    if (!(diff <= allowed)) {
      ++bad;
      double excess = std::isnan(diff) ? INFINITY : diff - allowed;
      if (worst < 0 || excess > worst_excess) worst = i, worst_excess = excess;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << a.numel() << " elements differ beyond rtol=" << t.rtol << " atol=" << t.atol
         << "; worst at flat index " << worst << ": actual " << pa[worst] << ", expected " << pe[worst];
}

Tensor random_tensor(IntArrayRef sizes, ScalarType dtype, double low, double high) {
  if (dtype == kBool) return rand(sizes) < 0.5;
  if (!is_floating_point(dtype))
    return randint(static_cast<int64_t>(low), static_cast<int64_t>(high), sizes, dtype);
  return (rand(sizes, kFloat64) * (high - low) + low).to(dtype);
}

Tensor with_row_stride(const Tensor& t, int64_t row_stride) {
  const int64_t len = t.size(-1);
  Tensor rows = empty({t.numel() / len, row_stride}, t.options()).narrow(1, 0, len);
  return rows.view(t.sizes()).copy_(t.detach());
}

Tensor asking_for_row_sums(const Tensor& h, RowSumsSeen* seen, int64_t row_stride) {
  Tensor out = row_stride > 0 ? with_row_stride(h, row_stride) : h.detach().clone();
  record("asking_for_row_sums", {h}, {out}, [seen](const GradContext& g) -> std::vector<Tensor> {
    *seen = {g.grad(), g.grad_row_sums(0)};
    return {g.grad()};
  });
  out.grad_fn()->want_grad_row_sums(0);
  return out;
}

Tensor non_contiguous(const Tensor& t) {
  // Double the last dim, take every other element: same values, stride 2.
  if (t.dim() == 0) return t;
  DimVector big(t.sizes());
  big.back() *= 2;
  Tensor buf = zeros(big, TensorOptions(t.dtype()).device(t.device()));
  Tensor view = buf.slice(-1, 0, std::nullopt, 2);
  view.copy_(t);
  return view;
}

std::vector<OpEntry>& op_table() {
  static std::vector<OpEntry> table;
  return table;
}

OpTableRegistrar::OpTableRegistrar(std::vector<OpEntry> entries) {
  for (auto& e : entries) op_table().push_back(std::move(e));
}

std::vector<GradcheckCase>& gradcheck_table() {
  static std::vector<GradcheckCase> table;
  return table;
}

GradcheckRegistrar::GradcheckRegistrar(std::vector<GradcheckCase> cases) {
  for (auto& c : cases) gradcheck_table().push_back(std::move(c));
}

std::vector<Sample> samples_from_shapes(ScalarType dtype, std::vector<std::vector<DimVector>> shapes,
                                        double low, double high) {
  std::vector<Sample> out;
  for (const auto& call : shapes) {
    Sample s;
    std::ostringstream desc;
    for (const DimVector& shape : call) {
      s.inputs.push_back(random_tensor(shape, dtype, low, high));
      desc << IntArrayRef(shape) << " ";
    }
    s.desc = desc.str();
    out.push_back(s);
  }
  if (!out.empty()) {
    Sample nc = out.front();
    for (Tensor& t : nc.inputs) t = non_contiguous(t);
    nc.desc += "(non-contiguous)";
    out.push_back(nc);
  }
  return out;
}

std::vector<std::vector<DimVector>> unary_shapes() { return {{{4, 5}}, {{}}, {{3, 0}}, {{2, 3, 4}}}; }

std::vector<std::vector<DimVector>> binary_shapes() {
  return {{{4, 5}, {4, 5}}, {{3, 1, 5}, {4, 1}}, {{4, 5}, {}}, {{0, 5}, {1, 5}}, {{5}, {2, 5}}};
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "ember_test_XXXXXX").string();
  EMBER_CHECK(mkdtemp(tmpl.data()), "TempDir: mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::file(const std::string& name) const {
  return (std::filesystem::path(path_) / name).string();
}

std::string TempDir::new_file(const std::string& name) const {
  std::filesystem::path p = std::filesystem::path(path_) / name;
  std::filesystem::create_directories(p.parent_path());
  return p.string();
}

size_t TempDir::count() const {
  return static_cast<size_t>(
      std::distance(std::filesystem::directory_iterator(path_), std::filesystem::directory_iterator()));
}

int run_program(const std::string& program, const std::string& args, const std::string& log) {
  return std::system((program + " " + args + " > " + log + " 2>&1").c_str());
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string unlabelled_error(const std::function<void()>& call, const std::string& names,
                             const std::function<void()>& then) {
  try {
    call();
    if (then) then();
  } catch (const Error& e) {
    const std::string what = e.what();
    for (size_t begin = 0; begin <= names.size();) {
      const size_t end = std::min(names.find('|', begin), names.size());
      if (what.find(names.substr(begin, end - begin) + ":") != std::string::npos) return "";
      begin = end + 1;
    }
    return "ember::Error not labelled \"" + names + "\": \"" + what + "\"";
  } catch (const std::exception& e) {
    return std::string("another exception: ") + e.what();
  } catch (...) {
    return "a non-std exception";
  }
  return "no error";
}

}  // namespace ember::testing
