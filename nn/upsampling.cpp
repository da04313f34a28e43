#include "ember/nn/upsampling.h"

#include <cmath>
#include <sstream>

#include "ember/core/factories.h"
#include "ember/core/ops/elementwise.h"
#include "ember/core/ops/indexing.h"
#include "ember/core/ops/nn_util.h"

namespace ember::nn {
namespace {

// One spatial dim's resize: output size and PyTorch's index scale (in / out for a given size,
// 1 / scale_factor for a given factor).
struct Axis {
  int64_t in, out;
  double scale;
};

// nearest: source index floor(dst * scale), at most in - 1.
Tensor nearest(const Tensor& x, int64_t dim, const Axis& a, ScalarType acc) {
  const TensorOptions o = TensorOptions(acc).device(x.device());
  const Tensor src = (arange(a.out, o) * a.scale).floor().clamp(std::nullopt, a.in - 1).to(kInt64);
  return index_select(x, dim, src);
}

// linear along `dim`: the two neighbours of the source position, weighted by their distances.
Tensor linear(const Tensor& x, int64_t dim, const Axis& a, bool align_corners, ScalarType acc) {
  const TensorOptions o = TensorOptions(acc).device(x.device());
  Tensor src;
  if (align_corners) {
    const double step = a.out > 1 ? static_cast<double>(a.in - 1) / static_cast<double>(a.out - 1) : 0.0;
    src = arange(a.out, o) * step;
  } else {
    src = ((arange(a.out, o) + 0.5) * a.scale - 0.5).clamp(0, std::nullopt);
  }
  const Tensor i0 = src.floor().clamp(std::nullopt, a.in - 1);
  const Tensor i1 = (i0 + 1).clamp(std::nullopt, a.in - 1);
  const Tensor l1 = src - i0, l0 = 1 - l1;
  // The weights broadcast along the dims after `dim`.
  DimVector shape(static_cast<size_t>(x.dim() - dim), 1);
  shape[0] = a.out;
  return index_select(x, dim, i0.to(kInt64)) * l0.view(shape) +
         index_select(x, dim, i1.to(kInt64)) * l1.view(shape);
}

}  // namespace

namespace functional {

Tensor interpolate(const Tensor& input, const InterpolateOptions& options) {
  const char* op = "interpolate";
  EMBER_CHECK(input.defined(), op, ": the input is undefined (default-constructed)");
  const int64_t spatial = input.dim() - 2;
  EMBER_CHECK(spatial >= 1 && spatial <= 3, op, ": expected a 3D, 4D or 5D input [N, C, ...], got shape ",
              input.sizes());
  EMBER_CHECK(input.is_floating_point(), op, ": expected a floating point input, got ", input.dtype());
  const std::string& mode = options.mode();
  const bool is_linear = mode == "linear" || mode == "bilinear";
  EMBER_CHECK(mode == "nearest" || is_linear, op, ": mode '", mode,
              "' is not supported (nearest, linear, bilinear)");
  EMBER_CHECK(mode != "linear" || spatial == 1, op, ": mode 'linear' expects a 3D input, got ", input.dim(),
              "D");
  EMBER_CHECK(mode != "bilinear" || spatial == 2, op, ": mode 'bilinear' expects a 4D input, got ",
              input.dim(), "D");
  EMBER_CHECK(is_linear || !options.align_corners().has_value(), op,
              ": align_corners only applies to the linear modes, not '", mode, "'");
  const bool has_size = !options.size().empty(), has_scale = !options.scale_factor().empty();
  EMBER_CHECK(has_size != has_scale, op, ": give exactly one of size and scale_factor");
  auto per_dim = [&](auto values, const char* what) {
    EMBER_CHECK(values.size() == 1 || static_cast<int64_t>(values.size()) == spatial, op, ": ", what, " has ",
                values.size(), " values for ", spatial, " spatial dims");
    return [values](int64_t d) { return values[values.size() == 1 ? 0 : static_cast<size_t>(d)]; };
  };
  std::vector<Axis> axes;
  if (has_size) {
    auto size = per_dim(options.size(), "size");
    for (int64_t d = 0; d < spatial; ++d) {
      const int64_t in = input.size(d + 2), out = size(d);
      EMBER_CHECK(out > 0, op, ": output sizes must be positive, got ", out);
      axes.push_back({in, out, static_cast<double>(in) / static_cast<double>(out)});
    }
  } else {
    auto factor = per_dim(options.scale_factor(), "scale_factor");
    for (int64_t d = 0; d < spatial; ++d) {
      const int64_t in = input.size(d + 2);
      const double f = factor(d);
      EMBER_CHECK(f > 0 && std::isfinite(f), op, ": scale_factor must be positive, got ", f);
      const auto out = static_cast<int64_t>(std::floor(static_cast<double>(in) * f));
      EMBER_CHECK(out > 0, op, ": input size ", in, " times scale_factor ", f, " leaves no output");
      axes.push_back({in, out, 1.0 / f});
    }
  }
  EMBER_CHECK(input.numel() > 0 || input.size(0) == 0 || input.size(1) == 0, op,
              ": an input with an empty spatial dim cannot be resized, got shape ", input.sizes());
  // Source positions in float32 (float64 for float64 inputs), as PyTorch's kernels compute them.
  const ScalarType acc = nn_detail::compute_dtype(input.dtype());
  const bool reduced = is_reduced_float(input.dtype());
  Tensor x = is_linear && reduced ? input.to(kFloat32) : input;
  for (int64_t d = 0; d < spatial; ++d)
    x = is_linear
            ? linear(x, d + 2, axes[static_cast<size_t>(d)], options.align_corners().value_or(false), acc)
            : nearest(x, d + 2, axes[static_cast<size_t>(d)], acc);
  return is_linear && reduced ? x.to(input.dtype()) : x;
}

}  // namespace functional

std::string UpsampleImpl::extra_repr() const {
  std::ostringstream s;
  if (!options.size().empty()) {
    s << "size=(";
    for (size_t i = 0; i < options.size().size(); ++i) s << (i ? ", " : "") << options.size()[i];
    s << ")";
  } else {
    s << "scale_factor=(";
    for (size_t i = 0; i < options.scale_factor().size(); ++i)
      s << (i ? ", " : "") << options.scale_factor()[i];
    s << ")";
  }
  s << ", mode='" << options.mode() << "'";
  return s.str();
}

}  // namespace ember::nn
