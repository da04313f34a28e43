// Op-table entries for the convolutions (core/ops/convolution.h). A sample's last input is an
// int64 tensor holding the call's size arguments (the harness passes integer inputs through
// unchanged), so one entry covers stride, padding, dilation and groups variations.
#include "ember/core/ops/convolution.h"
#include "test_util.h"

namespace ember::testing {
namespace {

std::vector<int64_t> args_of(const Tensor& t) {
  Tensor c = t.cpu();  // the CUDA suite moves every input to the GPU
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

// input, weight, bias of `bias_size` (none when 0), then the arguments.
Sample conv_sample(ScalarType dt, IntArrayRef x, IntArrayRef w, int64_t bias_size,
                   const std::vector<int64_t>& args, const std::string& desc) {
  Sample s{{random_tensor(x, dt, -1, 1), random_tensor(w, dt, -1, 1)}, desc};
  if (bias_size) s.inputs.push_back(random_tensor({bias_size}, dt, -1, 1));
  s.inputs.push_back(tensor(NestedList(args)));
  return s;
}

Sample non_contiguous_sample(Sample s) {
  for (size_t i = 0; i + 1 < s.inputs.size(); ++i) s.inputs[i] = non_contiguous(s.inputs[i]);
  s.desc += " (non-contiguous)";
  return s;
}

Tensor bias_of(const std::vector<Tensor>& in) { return in.size() == 4 ? in[2] : Tensor(); }

// conv1d arguments: {stride, padding, dilation, groups}; padding -1 means "same".
std::vector<Sample> conv1d_samples(ScalarType dt) {
  std::vector<Sample> s = {
      conv_sample(dt, {2, 3, 10}, {4, 3, 3}, 4, {1, 0, 1, 1}, "plain"),
      conv_sample(dt, {2, 4, 11}, {6, 2, 3}, 6, {2, 1, 1, 2}, "stride 2, padding 1, groups 2"),
      conv_sample(dt, {1, 3, 12}, {2, 3, 4}, 0, {1, 3, 2, 1}, "dilation 2, no bias"),
      conv_sample(dt, {3, 9}, {5, 3, 4}, 5, {1, -1, 1, 1}, "unbatched, padding same"),
      conv_sample(dt, {0, 3, 8}, {4, 3, 3}, 4, {1, 0, 1, 1}, "empty batch"),
  };
  s.push_back(non_contiguous_sample(s[1]));
  return s;
}

Tensor run_conv1d(const std::vector<Tensor>& in) {
  std::vector<int64_t> a = args_of(in.back());
  if (a[1] < 0) return conv1d(in[0], in[1], bias_of(in), a[0], "same", a[2], a[3]);
  return conv1d(in[0], in[1], bias_of(in), a[0], a[1], a[2], a[3]);
}

// conv2d arguments: {stride h, w, padding h, w, dilation h, w, groups}; padding -1: "same".
std::vector<Sample> conv2d_samples(ScalarType dt) {
  std::vector<Sample> s = {
      conv_sample(dt, {2, 3, 7, 6}, {4, 3, 3, 3}, 4, {1, 1, 0, 0, 1, 1, 1}, "plain"),
      conv_sample(dt, {2, 3, 9, 8}, {5, 3, 3, 3}, 5, {2, 2, 1, 1, 1, 1, 1}, "stride 2, padding 1"),
      conv_sample(dt, {1, 2, 9, 10}, {3, 2, 3, 2}, 0, {2, 1, 1, 0, 1, 1, 1},
                  "stride (2, 1), padding (1, 0), 3x2 kernel, no bias"),
      conv_sample(dt, {2, 3, 9, 9}, {4, 3, 3, 3}, 4, {1, 1, 2, 2, 2, 2, 1}, "dilation 2"),
      conv_sample(dt, {2, 4, 6, 6}, {6, 2, 3, 3}, 6, {1, 1, 1, 1, 1, 1, 2}, "groups 2"),
      conv_sample(dt, {2, 4, 5, 5}, {4, 1, 3, 3}, 4, {1, 1, 1, 1, 1, 1, 4}, "depthwise"),
      conv_sample(dt, {2, 5, 4, 3}, {6, 5, 1, 1}, 6, {1, 1, 0, 0, 1, 1, 1}, "1x1"),
      conv_sample(dt, {3, 6, 7}, {4, 3, 2, 4}, 4, {1, 1, -1, -1, 2, 1, 1},
                  "unbatched, padding same"),
      conv_sample(dt, {0, 3, 5, 5}, {4, 3, 3, 3}, 4, {1, 1, 0, 0, 1, 1, 1}, "empty batch"),
      conv_sample(dt, {1, 64, 10, 10}, {32, 64, 3, 3}, 32, {1, 1, 1, 1, 1, 1, 1}, "wide"),
  };
  s.push_back(non_contiguous_sample(s[1]));
  return s;
}

Tensor run_conv2d(const std::vector<Tensor>& in) {
  std::vector<int64_t> a = args_of(in.back());
  if (a[2] < 0) return conv2d(in[0], in[1], bias_of(in), {a[0], a[1]}, "same", {a[4], a[5]}, a[6]);
  return conv2d(in[0], in[1], bias_of(in), {a[0], a[1]}, {a[2], a[3]}, {a[4], a[5]}, a[6]);
}

// conv3d arguments: {stride d, h, w, padding d, h, w, dilation d, h, w, groups}; padding -1: "same".
std::vector<Sample> conv3d_samples(ScalarType dt) {
  std::vector<Sample> s = {
      conv_sample(dt, {2, 3, 5, 6, 5}, {4, 3, 3, 3, 3}, 4, {1, 1, 1, 0, 0, 0, 1, 1, 1, 1}, "plain"),
      conv_sample(dt, {1, 4, 7, 6, 6}, {6, 2, 3, 2, 3}, 6, {2, 1, 2, 1, 0, 1, 1, 1, 1, 2},
                  "stride (2, 1, 2), padding (1, 0, 1), groups 2"),
      conv_sample(dt, {2, 2, 8, 5, 5}, {3, 2, 2, 3, 3}, 0, {1, 1, 1, 2, 1, 1, 3, 1, 1, 1},
                  "depth dilation 3, no bias"),
      conv_sample(dt, {3, 4, 5, 5}, {2, 3, 3, 3, 3}, 2, {1, 1, 1, -1, -1, -1, 1, 1, 1, 1},
                  "unbatched, padding same"),
      conv_sample(dt, {0, 3, 4, 4, 4}, {4, 3, 3, 3, 3}, 4, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, "empty batch"),
  };
  s.push_back(non_contiguous_sample(s[1]));
  return s;
}

Tensor run_conv3d(const std::vector<Tensor>& in) {
  std::vector<int64_t> a = args_of(in.back());
  if (a[3] < 0) return conv3d(in[0], in[1], bias_of(in), {a[0], a[1], a[2]}, "same", {a[6], a[7], a[8]}, a[9]);
  return conv3d(in[0], in[1], bias_of(in), {a[0], a[1], a[2]}, {a[3], a[4], a[5]}, {a[6], a[7], a[8]}, a[9]);
}

// conv_transpose2d arguments: {stride h, w, padding h, w, output_padding h, w, groups,
// dilation h, w}.
std::vector<Sample> conv_transpose2d_samples(ScalarType dt) {
  std::vector<Sample> s = {
      conv_sample(dt, {2, 4, 5, 5}, {4, 3, 3, 3}, 3, {1, 1, 0, 0, 0, 0, 1, 1, 1}, "plain"),
      conv_sample(dt, {2, 4, 5, 4}, {4, 3, 3, 3}, 3, {2, 2, 1, 1, 1, 1, 1, 1, 1},
                  "stride 2, padding 1, output_padding 1"),
      conv_sample(dt, {1, 4, 4, 5}, {4, 2, 3, 2}, 0, {2, 1, 0, 1, 0, 0, 2, 1, 1},
                  "stride (2, 1), groups 2, no bias"),
      conv_sample(dt, {2, 2, 4, 4}, {2, 3, 3, 3}, 3, {1, 1, 1, 1, 0, 0, 1, 2, 2}, "dilation 2"),
      conv_sample(dt, {3, 5, 5}, {3, 2, 2, 2}, 2, {2, 2, 0, 0, 0, 0, 1, 1, 1}, "unbatched"),
      conv_sample(dt, {0, 4, 5, 5}, {4, 3, 3, 3}, 3, {1, 1, 0, 0, 0, 0, 1, 1, 1}, "empty batch"),
  };
  s.push_back(non_contiguous_sample(s[1]));
  return s;
}

Tensor run_conv_transpose2d(const std::vector<Tensor>& in) {
  std::vector<int64_t> a = args_of(in.back());
  return conv_transpose2d(in[0], in[1], bias_of(in), {a[0], a[1]}, {a[2], a[3]}, {a[4], a[5]}, a[6],
                          {a[7], a[8]});
}

// Sums of up to 576 products accumulate in float32; f16/bf16 round once at the end.
const OpTableRegistrar registrar({
    {"conv1d", conv1d_samples, run_conv1d, {kFloat32, kFloat64, kFloat16, kBFloat16}, 8},
    {"conv2d", conv2d_samples, run_conv2d, {kFloat32, kFloat64, kFloat16, kBFloat16}, 8},
    {"conv3d", conv3d_samples, run_conv3d, {kFloat32, kFloat64, kFloat16, kBFloat16}, 8},
    {"conv_transpose2d",
     conv_transpose2d_samples,
     run_conv_transpose2d,
     {kFloat32, kFloat64, kFloat16, kBFloat16},
     8},
});

}  // namespace
}  // namespace ember::testing
