// Op-table entries for 2D and 3D pooling (core/ops/pooling.h). A sample's second input is an int64
// tensor holding the call's arguments (the harness passes integer inputs through unchanged).
#include <sstream>

#include "ember/core/ops/pooling.h"
#include "test_util.h"

namespace ember::testing {
namespace {

std::vector<int64_t> args_of(const Tensor& t) {
  const Tensor c = t.cpu().contiguous();
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

// The cases, a non-contiguous copy of the first, and for 2D pooling (a 4D first case) the first
// laid out channels-last.
std::vector<Sample> pool_samples(ScalarType dt,
                                 std::vector<std::pair<DimVector, std::vector<int64_t>>> cases) {
  std::vector<Sample> out;
  for (const auto& [shape, args] : cases) {
    std::ostringstream desc;
    desc << IntArrayRef(shape) << " args " << IntArrayRef(args);
    out.push_back({{random_tensor(shape, dt), tensor(NestedList(args))}, desc.str()});
  }
  out.push_back({{non_contiguous(out[0].inputs[0]), out[0].inputs[1]}, out[0].desc + " (non-contiguous)"});
  if (out[0].inputs[0].dim() == 4)  // pooled as NHWC
    out.push_back({{out[0].inputs[0].contiguous(MemoryFormat::ChannelsLast), out[0].inputs[1]},
                   out[0].desc + " (channels-last)"});
  return out;
}

// max_pool2d arguments: {kernel h, w, stride h, w (0: default), padding h, w, dilation h, w,
// ceil_mode}.
std::vector<Sample> max_samples(ScalarType dt) {
  return pool_samples(dt, {{{2, 3, 7, 7}, {3, 3, 2, 2, 1, 1, 1, 1, 0}},
                           {{2, 3, 8, 6}, {2, 2, 0, 0, 0, 0, 1, 1, 0}},
                           {{1, 2, 8, 8}, {3, 2, 2, 2, 1, 1, 1, 1, 1}},
                           {{1, 2, 9, 9}, {3, 3, 2, 1, 1, 0, 2, 2, 0}},
                           {{3, 6, 5}, {2, 3, 2, 2, 0, 1, 1, 1, 1}},
                           {{0, 2, 5, 5}, {2, 2, 0, 0, 0, 0, 1, 1, 0}}});
}

std::tuple<Tensor, Tensor> run_max(const std::vector<Tensor>& in) {
  std::vector<int64_t> a = args_of(in[1]);
  std::vector<int64_t> stride;
  if (a[2]) stride = {a[2], a[3]};
  return max_pool2d_with_indices(in[0], {a[0], a[1]}, stride, {a[4], a[5]}, {a[6], a[7]}, a[8]);
}

// avg_pool2d arguments: {kernel h, w, stride h, w (0: default), padding h, w, ceil_mode,
// count_include_pad, divisor_override (0: none)}.
std::vector<Sample> avg_samples(ScalarType dt) {
  return pool_samples(dt, {{{2, 3, 7, 7}, {3, 3, 2, 2, 1, 1, 0, 1, 0}},
                           {{2, 3, 7, 7}, {3, 3, 2, 2, 1, 1, 0, 0, 0}},
                           {{1, 2, 8, 8}, {3, 2, 2, 2, 1, 1, 1, 1, 0}},
                           {{1, 2, 8, 8}, {3, 3, 2, 2, 1, 1, 1, 0, 0}},
                           {{1, 2, 6, 6}, {2, 2, 0, 0, 0, 0, 0, 1, 3}},
                           {{3, 6, 5}, {2, 3, 1, 2, 0, 1, 0, 1, 0}},
                           {{0, 2, 5, 5}, {2, 2, 0, 0, 0, 0, 0, 1, 0}}});
}

Tensor run_avg(const std::vector<Tensor>& in) {
  std::vector<int64_t> a = args_of(in[1]);
  std::vector<int64_t> stride;
  if (a[2]) stride = {a[2], a[3]};
  std::optional<int64_t> divisor;
  if (a[8]) divisor = a[8];
  return avg_pool2d(in[0], {a[0], a[1]}, stride, {a[4], a[5]}, a[6], a[7], divisor);
}

std::vector<Sample> adaptive_samples(ScalarType dt) {
  return pool_samples(dt, {{{2, 3, 7, 9}, {3, 4}},
                           {{2, 3, 7, 9}, {1, 1}},
                           {{1, 2, 5, 6}, {5, 6}},
                           {{1, 2, 4, 5}, {7, 8}},
                           {{3, 6, 5}, {2, 0}},
                           {{0, 2, 5, 5}, {2, 2}}});
}

// max_pool3d arguments: {kernel d, h, w, stride d, h, w (0: default), padding d, h, w, dilation
// d, h, w, ceil_mode}.
std::vector<Sample> max3d_samples(ScalarType dt) {
  return pool_samples(dt, {{{2, 3, 5, 7, 7}, {3, 3, 3, 2, 2, 2, 1, 1, 1, 1, 1, 1, 0}},
                           {{1, 2, 6, 8, 8}, {2, 3, 2, 2, 2, 2, 1, 1, 1, 2, 1, 1, 1}},
                           {{3, 4, 5, 6}, {2, 2, 2, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0}}});
}

Tensor run_max3d(const std::vector<Tensor>& in) {
  std::vector<int64_t> a = args_of(in[1]);
  std::vector<int64_t> stride;
  if (a[3]) stride = {a[3], a[4], a[5]};
  return max_pool3d(in[0], {a[0], a[1], a[2]}, stride, {a[6], a[7], a[8]}, {a[9], a[10], a[11]}, a[12]);
}

// avg_pool3d arguments: {kernel d, h, w, stride d, h, w (0: default), padding d, h, w,
// ceil_mode, count_include_pad, divisor_override (0: none)}.
std::vector<Sample> avg3d_samples(ScalarType dt) {
  return pool_samples(dt, {{{2, 3, 5, 7, 7}, {3, 3, 3, 2, 2, 2, 1, 1, 1, 0, 1, 0}},
                           {{1, 2, 6, 8, 7}, {3, 2, 3, 2, 2, 2, 1, 1, 1, 1, 0, 0}},
                           {{3, 4, 5, 6}, {2, 2, 2, 1, 1, 1, 0, 0, 0, 0, 1, 5}}});
}

Tensor run_avg3d(const std::vector<Tensor>& in) {
  std::vector<int64_t> a = args_of(in[1]);
  std::vector<int64_t> stride;
  if (a[3]) stride = {a[3], a[4], a[5]};
  std::optional<int64_t> divisor;
  if (a[11]) divisor = a[11];
  return avg_pool3d(in[0], {a[0], a[1], a[2]}, stride, {a[6], a[7], a[8]}, a[9], a[10], divisor);
}

std::vector<Sample> adaptive3d_samples(ScalarType dt) {
  return pool_samples(
      dt, {{{2, 3, 5, 7, 9}, {2, 3, 4}}, {{1, 2, 4, 5, 6}, {1, 1, 1}}, {{3, 3, 4, 5}, {5, 2, 7}}});
}

// Window sums of up to 9 values accumulate in float32.
const OpTableRegistrar registrar({
    {"max_pool2d", max_samples, [](const std::vector<Tensor>& in) { return std::get<0>(run_max(in)); }},
    {"max_pool2d_with_indices", max_samples,
     [](const std::vector<Tensor>& in) { return std::get<1>(run_max(in)); }},
    {"avg_pool2d", avg_samples, run_avg, {kFloat32, kFloat64, kFloat16, kBFloat16}, 2},
    {"adaptive_avg_pool2d",
     adaptive_samples,
     [](const std::vector<Tensor>& in) {
       std::vector<int64_t> a = args_of(in[1]);
       return adaptive_avg_pool2d(in[0], {a[0], a[1]});
     },
     {kFloat32, kFloat64, kFloat16, kBFloat16},
     2},
    {"max_pool3d", max3d_samples, run_max3d},
    // The two passes round f16 and bf16 twice.
    {"avg_pool3d", avg3d_samples, run_avg3d, {kFloat32, kFloat64, kFloat16, kBFloat16}, 4},
    {"adaptive_avg_pool3d",
     adaptive3d_samples,
     [](const std::vector<Tensor>& in) {
       std::vector<int64_t> a = args_of(in[1]);
       return adaptive_avg_pool3d(in[0], {a[0], a[1], a[2]});
     },
     {kFloat32, kFloat64, kFloat16, kBFloat16},
     4},
});

}  // namespace
}  // namespace ember::testing
