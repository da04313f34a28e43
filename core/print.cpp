// Printing in PyTorch's style: tensor([[1.0000, 2.5000], ...], dtype=float64).
#include <cmath>
#include <cstdio>
#include <functional>
#include <sstream>

#include "ember/core/tensor.h"

namespace ember {
namespace {

constexpr int64_t kThreshold = 1000;  // summarize above this many elements
constexpr int64_t kEdgeItems = 3;

struct Format {
  enum class Kind { Int, Bool, FloatInt, Fixed, Sci } kind;
  int width = 1;
};

std::string format_value(double v, const Format& f) {
  char buf[64];
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  switch (f.kind) {
    case Format::Kind::Bool:
      return v != 0 ? "True" : "False";
    case Format::Kind::Int:
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
      break;
    case Format::Kind::FloatInt:
      std::snprintf(buf, sizeof buf, "%.0f.", v);
      break;
    case Format::Kind::Fixed:
      std::snprintf(buf, sizeof buf, "%.4f", v);
      break;
    case Format::Kind::Sci:
      std::snprintf(buf, sizeof buf, "%.4e", v);
      break;
  }
  return buf;
}

// Visits the elements that will be shown (the edges of each dim when summarizing).
void visit_shown(const Tensor& t, bool summarize, const std::function<void(double)>& f) {
  if (t.dim() == 0) {
    f(t.item<double>());
    return;
  }
  int64_t n = t.size(0);
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) i = n - kEdgeItems;
    visit_shown(t.select(0, i), summarize, f);
  }
}

void print_rec(std::ostream& os, const Tensor& t, const Format& f, bool summarize, int indent) {
  if (t.dim() == 0) {
    std::string s = format_value(t.item<double>(), f);
    os << std::string(static_cast<size_t>(std::max<int>(0, f.width - static_cast<int>(s.size()))), ' ') << s;
    return;
  }
  os << "[";
  int64_t n = t.size(0);
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      os << (t.dim() == 1 ? " ..., " : "...,\n" + std::string(static_cast<size_t>(indent + 1), ' '));
      i = n - kEdgeItems;
    }
    print_rec(os, t.select(0, i), f, summarize, indent + 1);
    if (i + 1 < n) {
      if (t.dim() == 1) {
        os << ", ";
      } else {
        os << "," << std::string(static_cast<size_t>(t.dim() - 1), '\n')
           << std::string(static_cast<size_t>(indent + 1), ' ');
      }
    }
  }
  os << "]";
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "[ Tensor (undefined) ]";
  Tensor c = t.cpu();
  bool summarize = c.numel() > kThreshold;
  Format f;
  ScalarType dt = c.dtype();
  if (dt == kBool) {
    f.kind = Format::Kind::Bool;
  } else if (!is_floating_point(dt)) {
    f.kind = Format::Kind::Int;
  } else {
    bool all_int = true;
    double amax = 0, amin = INFINITY;
    visit_shown(c, summarize, [&](double v) {
      if (!std::isfinite(v)) return;
      all_int = all_int && v == std::floor(v);
      amax = std::max(amax, std::fabs(v));
      if (v != 0) amin = std::min(amin, std::fabs(v));
    });
    bool sci = amax > 1e8 || (amin < 1e-4 && amin > 0) || (amin != INFINITY && amax / amin > 1000);
    f.kind = all_int && amax < 1e8 ? Format::Kind::FloatInt : sci ? Format::Kind::Sci : Format::Kind::Fixed;
  }
  if (c.numel() > 0)
    visit_shown(c, summarize, [&](double v) {
      f.width = std::max<int>(f.width, static_cast<int>(format_value(v, f).size()));
    });
  os << "tensor(";
  if (c.numel() == 0) {
    os << "[]";
    if (c.dim() != 1) {
      os << ", size=(";
      for (int64_t d = 0; d < c.dim(); ++d) os << (d ? ", " : "") << c.size(d);
      os << (c.dim() == 1 ? ",)" : ")");
    }
  } else {
    print_rec(os, c, f, summarize, 7);
  }
  if (dt != kFloat32 && dt != kInt64 && dt != kBool) os << ", dtype=" << dt;
  if (!t.is_cpu()) os << ", device='" << t.device() << "'";
  return os << ")";
}

std::string Tensor::toString() const {
  std::ostringstream os;
  os << *this;
  return os.str();
}

}  // namespace ember
