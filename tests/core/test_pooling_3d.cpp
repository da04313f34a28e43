// 3D pooling (two passes of the 2D ops) against the definitions, in float64 loops with PyTorch's
// window rules: max over the cells inside the input; avg dividing by the window clipped to the
// padded input (count_include_pad), to the input, or by divisor_override; adaptive windows
// [floor(i * in / out), ceil((i + 1) * in / out)). And the 3D layers.
#include <cmath>
#include <limits>

#include "ember/nn/normalization.h"
#include "ember/nn/pooling.h"
#include "test_util.h"

namespace ember::testing {
namespace {

struct Window3 {
  int64_t k[3], s[3], p[3], dl[3];
  bool ceil_mode;
};

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t dl, bool ceil_mode) {
  const int64_t span = in + 2 * p - dl * (k - 1) - 1;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

// kind: 0 max, 1 avg counting the padding, 2 avg not counting it, 3 avg by divisor 5.
Tensor pool3d_by_definition(const Tensor& x, const Window3& w, int kind) {
  const int64_t n = x.size(0), c = x.size(1), in[3] = {x.size(2), x.size(3), x.size(4)};
  int64_t out[3];
  for (int d = 0; d < 3; ++d) out[d] = out_size(in[d], w.k[d], w.s[d], w.p[d], w.dl[d], w.ceil_mode);
  Tensor y = zeros({n, c, out[0], out[1], out[2]}, kFloat64);
  const Tensor xc = x.contiguous();
  const double* px = xc.data_ptr<double>();
  double* py = y.data_ptr<double>();
  int64_t o[3];
  for (int64_t b = 0; b < n * c; ++b)
    for (o[0] = 0; o[0] < out[0]; ++o[0])
      for (o[1] = 0; o[1] < out[1]; ++o[1])
        for (o[2] = 0; o[2] < out[2]; ++o[2]) {
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          int64_t inside = 1, padded = 1, first[3];
          for (int d = 0; d < 3; ++d) {
            first[d] = o[d] * w.s[d] - w.p[d];
            const int64_t end_padded = std::min(first[d] + w.k[d], in[d] + w.p[d]);
            padded *= end_padded - first[d];
            inside *= std::min(first[d] + w.k[d], in[d]) - std::max<int64_t>(first[d], 0);
          }
          for (int64_t i = 0; i < w.k[0]; ++i)
            for (int64_t j = 0; j < w.k[1]; ++j)
              for (int64_t l = 0; l < w.k[2]; ++l) {
                const int64_t z = first[0] + i * w.dl[0], r = first[1] + j * w.dl[1],
                              q = first[2] + l * w.dl[2];
                if (z < 0 || z >= in[0] || r < 0 || r >= in[1] || q < 0 || q >= in[2]) continue;
                const double v = px[((b * in[0] + z) * in[1] + r) * in[2] + q];
                best = std::max(best, v);
                sum += v;
              }
          const double divisor = kind == 1 ? padded : kind == 2 ? inside : 5;
          py[((b * out[0] + o[0]) * out[1] + o[1]) * out[2] + o[2]] = kind == 0 ? best : sum / divisor;
        }
  return y;
}

TEST(Pooling3d, MatchesTheDefinitions) {
  manual_seed(8);
  const Tensor x = randn({2, 3, 6, 7, 5}, kFloat64);
  const Window3 windows[] = {
      {{3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, false},
      {{2, 3, 2}, {2, 1, 2}, {1, 1, 0}, {1, 1, 1}, true},  // ceil_mode windows past the padding
      {{3, 2, 2}, {1, 2, 1}, {1, 0, 1}, {1, 1, 1}, false},
  };
  for (const Window3& w : windows) {
    const std::vector<int64_t> k(w.k, w.k + 3), s(w.s, w.s + 3), p(w.p, w.p + 3);
    SCOPED_TRACE(::testing::Message() << "kernel " << IntArrayRef(k) << " stride " << IntArrayRef(s)
                                      << " padding " << IntArrayRef(p) << " ceil_mode " << w.ceil_mode);
    EXPECT_CLOSE(max_pool3d(x, k, s, p, 1, w.ceil_mode), pool3d_by_definition(x, w, 0));
    EXPECT_CLOSE(avg_pool3d(x, k, s, p, w.ceil_mode, true), pool3d_by_definition(x, w, 1));
    EXPECT_CLOSE(avg_pool3d(x, k, s, p, w.ceil_mode, false), pool3d_by_definition(x, w, 2));
    EXPECT_CLOSE(avg_pool3d(x, k, s, p, w.ceil_mode, true, 5), pool3d_by_definition(x, w, 3));
  }
  const Window3 dilated{{2, 2, 3}, {1, 2, 1}, {1, 0, 1}, {2, 1, 2}, false};
  EXPECT_CLOSE(max_pool3d(x, {2, 2, 3}, {1, 2, 1}, {1, 0, 1}, {2, 1, 2}),
               pool3d_by_definition(x, dilated, 0));
  EXPECT_CLOSE(max_pool3d(x[1], 2),
               pool3d_by_definition(x[1].unsqueeze(0), {{2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}, false},
                                    0)[0]);  // unbatched
}

TEST(Pooling3d, AdaptiveAverageMatchesItsWindows) {
  manual_seed(9);
  const Tensor x = randn({2, 2, 5, 7, 4}, kFloat64);
  const int64_t out[3] = {3, 2, 4};
  Tensor want = zeros({2, 2, 3, 2, 4}, kFloat64);
  for (int64_t i = 0; i < out[0]; ++i)
    for (int64_t j = 0; j < out[1]; ++j)
      for (int64_t l = 0; l < out[2]; ++l) {
        auto range = [](int64_t o, int64_t in, int64_t n) {
          return std::pair<int64_t, int64_t>{o * in / n, ((o + 1) * in + n - 1) / n};
        };
        const auto [z0, z1] = range(i, 5, out[0]);
        const auto [r0, r1] = range(j, 7, out[1]);
        const auto [q0, q1] = range(l, 4, out[2]);
        want.index_put_({Slice(), Slice(), i, j, l},
                        x.slice(2, z0, z1).slice(3, r0, r1).slice(4, q0, q1).mean({2, 3, 4}));
      }
  EXPECT_CLOSE(adaptive_avg_pool3d(x, {3, 2, 4}), want);
}

// The layers call the ops; BatchNorm3d keeps per-channel statistics over N, D, H and W, as
// BatchNorm2d over the same values laid out [N, C, D * H, W].
TEST(Pooling3d, LayersAndBatchNorm3d) {
  manual_seed(10);
  const Tensor x = randn({2, 3, 4, 6, 6});
  EXPECT_CLOSE(nn::MaxPool3d(nn::MaxPool3dOptions(3).stride(2).padding(1))(x), max_pool3d(x, 3, 2, 1));
  EXPECT_CLOSE(nn::AvgPool3d(nn::AvgPool3dOptions({2, 3, 3}).stride(1))(x), avg_pool3d(x, {2, 3, 3}, 1));
  EXPECT_CLOSE(nn::AdaptiveAvgPool3d(nn::AdaptiveAvgPool3dOptions({1, 1, 1}))(x), x.mean({2, 3, 4}, true),
               Tolerance{1e-6, 1e-6});
  std::ostringstream repr;
  repr << *nn::MaxPool3d(nn::MaxPool3dOptions(3).stride(2).padding(1));
  EXPECT_EQ(repr.str(), "MaxPool3d(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=false)");
  EXPECT_EMBER_ERROR(nn::MaxPool3d(2)(randn({2, 4, 4})), "MaxPool3d", "4D (unbatched) or 5D (batched)");

  nn::BatchNorm3d bn3(3);
  nn::BatchNorm2d bn2(3);
  EXPECT_CLOSE(bn3(x), bn2(x.reshape({2, 3, 24, 6})).reshape(x.sizes()), Tolerance{1e-5, 1e-6});
  EXPECT_CLOSE(bn3->running_var, bn2->running_var, Tolerance{1e-6, 1e-6});
  EXPECT_EMBER_ERROR(bn3(randn({2, 3, 4, 4})), "BatchNorm3d", "5D");
}

}  // namespace
}  // namespace ember::testing
