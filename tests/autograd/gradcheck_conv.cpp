// Gradcheck cases for the convolutions, 2D pooling and einsum.
#include "test_util.h"

namespace ember::testing {
namespace {

using Inputs = std::vector<Tensor>;

const GradcheckRegistrar registrar({
    // --- conv2d ---
    {"conv2d",
     [](const Inputs& x) { return conv2d(x[0], x[1], x[2], 1, 1); },
     {{2, 2, 4, 4}, {2, 2, 3, 3}, {2}},
     -2,
     2,
     true},
    {"conv2d",
     [](const Inputs& x) { return conv2d(x[0], x[1], Tensor(), {2, 1}, {1, 2}, {2, 1}); },
     {{1, 2, 6, 5}, {2, 2, 2, 3}}},
    {"conv2d",  // groups, strides that skip input rows
     [](const Inputs& x) { return conv2d(x[0], x[1], x[2], {2, 3}, 0, 1, 2); },
     {{2, 4, 5, 5}, {4, 2, 2, 2}, {4}},
     -2,
     2,
     true},
    {"conv2d",  // "same" with an even kernel pads more at the end
     [](const Inputs& x) { return conv2d(x[0], x[1], x[2], 1, "same", {1, 2}); },
     {{1, 2, 4, 5}, {2, 2, 2, 2}, {2}},
     -2,
     2,
     true},
    {"conv2d",
     [](const Inputs& x) { return conv2d(x[0], x[1], x[2], 1, "valid"); },
     {{2, 4, 4}, {3, 2, 3, 2}, {3}}},
    {"conv2d",  // 1x1: the kernels read the input as the column matrix
     [](const Inputs& x) { return conv2d(x[0], x[1], x[2]); },
     {{2, 2, 3, 3}, {3, 2, 1, 1}, {3}},
     -2,
     2,
     true},
    // --- conv1d ---
    {"conv1d",
     [](const Inputs& x) { return conv1d(x[0], x[1], x[2], 2, 1); },
     {{2, 2, 7}, {3, 2, 3}, {3}},
     -2,
     2,
     true},
    {"conv1d",
     [](const Inputs& x) { return conv1d(x[0], x[1], x[2], 1, "same", 1, 2); },
     {{2, 4, 6}, {2, 2, 4}, {2}}},
    {"conv1d",
     [](const Inputs& x) { return conv1d(x[0], x[1], Tensor(), 1, 2, 3); },
     {{2, 8}, {3, 2, 2}}},
    // --- conv3d ---
    {"conv3d",
     [](const Inputs& x) { return conv3d(x[0], x[1], x[2], {2, 1, 1}, {1, 0, 1}, {1, 1, 2}); },
     {{2, 2, 5, 4, 5}, {3, 2, 2, 2, 2}, {3}},
     -2,
     2,
     true},
    {"conv3d",
     [](const Inputs& x) { return conv3d(x[0], x[1], Tensor(), 1, "same", {2, 1, 1}, 2); },
     {{4, 5, 3, 3}, {2, 2, 3, 1, 2}}},
    // --- conv_transpose2d ---
    {"conv_transpose2d",
     [](const Inputs& x) { return conv_transpose2d(x[0], x[1], x[2], 2, 1, 1); },
     {{2, 2, 3, 3}, {2, 3, 3, 3}, {3}},
     -2,
     2,
     true},
    {"conv_transpose2d",
     [](const Inputs& x) {
       return conv_transpose2d(x[0], x[1], x[2], {1, 2}, {0, 1}, {1, 1}, 2, 2);
     },
     {{1, 4, 3, 3}, {4, 1, 2, 2}, {2}},
     -2,
     2,
     true},
    {"conv_transpose2d",
     [](const Inputs& x) { return conv_transpose2d(x[0], x[1], Tensor(), 1, 0, 0, 1, {1, 2}); },
     {{2, 3, 2}, {2, 2, 2, 2}}},
    // --- pooling (random inputs have no ties) ---
    {"max_pool2d",
     [](const Inputs& x) { return max_pool2d(x[0], 3, 2, 1); },
     {{2, 2, 5, 5}}},
    {"max_pool2d",
     [](const Inputs& x) { return max_pool2d(x[0], {2, 3}, {2, 1}, {1, 0}, 2, true); },
     {{1, 2, 6, 5}}},
    {"max_pool2d_with_indices",
     [](const Inputs& x) { return std::get<0>(max_pool2d_with_indices(x[0], 2, 1, 1)); },
     {{2, 4, 4}}},
    {"max_pool2d_with_indices",
     [](const Inputs& x) {
       return std::get<0>(max_pool2d_with_indices(x[0], 3, 2, 0, 1, true));
     },
     {{1, 2, 6, 6}}},
    {"avg_pool2d",
     [](const Inputs& x) { return avg_pool2d(x[0], 3, 2, 1); },
     {{2, 2, 5, 5}},
     -2,
     2,
     true},
    {"avg_pool2d",  // a ceil_mode window past the padding (W), divisors excluding the padding
     [](const Inputs& x) { return avg_pool2d(x[0], {2, 3}, 2, 1, true, false); },
     {{1, 2, 5, 6}}},
    {"avg_pool2d",  // a ceil_mode window past the padding (H), divisors counting the padding
     [](const Inputs& x) { return avg_pool2d(x[0], 3, 2, 1, true, true); },
     {{1, 2, 6, 5}},
     -2,
     2,
     true},
    {"avg_pool2d",
     [](const Inputs& x) { return avg_pool2d(x[0], 2, 1, 0, false, true, 3); },
     {{2, 4, 3}}},
    {"max_pool3d",
     [](const Inputs& x) { return max_pool3d(x[0], {2, 3, 2}, {1, 2, 2}, {1, 1, 0}, {1, 1, 2}, true); },
     {{1, 2, 4, 5, 6}}},
    {"avg_pool3d",
     [](const Inputs& x) { return avg_pool3d(x[0], 3, 2, 1, true, false); },
     {{1, 2, 5, 4, 6}},
     -2,
     2,
     true},
    {"avg_pool3d",
     [](const Inputs& x) { return avg_pool3d(x[0], 2, 1, 0, false, true, 5); },
     {{2, 3, 4, 3}}},
    {"adaptive_avg_pool3d",
     [](const Inputs& x) { return adaptive_avg_pool3d(x[0], {2, 3, 2}); },
     {{1, 2, 5, 4, 5}}},
    {"adaptive_avg_pool2d",
     [](const Inputs& x) { return adaptive_avg_pool2d(x[0], {3, 4}); },
     {{2, 2, 5, 7}},
     -2,
     2,
     true},
    {"adaptive_avg_pool2d",
     [](const Inputs& x) { return adaptive_avg_pool2d(x[0], {1, 7}); },
     {{2, 3, 5}}},
    // Channels-last inputs, pooled as NHWC (gradcheck perturbs a contiguous input: fn converts).
    {"max_pool2d",
     [](const Inputs& x) { return max_pool2d(x[0].contiguous(MemoryFormat::ChannelsLast), 3, 2, 1); },
     {{2, 3, 5, 5}},
     -2,
     2,
     true},
    {"max_pool2d_with_indices",
     [](const Inputs& x) {
       Tensor xl = x[0].contiguous(MemoryFormat::ChannelsLast);
       return std::get<0>(max_pool2d_with_indices(xl, {2, 3}, {2, 1}, {1, 0}, 2, true));
     },
     {{1, 3, 6, 5}}},
    {"avg_pool2d",
     [](const Inputs& x) {
       return avg_pool2d(x[0].contiguous(MemoryFormat::ChannelsLast), 3, 2, 1, true, false);
     },
     {{2, 3, 5, 6}},
     -2,
     2,
     true},
    {"adaptive_avg_pool2d",
     [](const Inputs& x) {
       return adaptive_avg_pool2d(x[0].contiguous(MemoryFormat::ChannelsLast), {3, 4});
     },
     {{2, 3, 5, 7}},
     -2,
     2,
     true},
    // --- einsum ---
    {"einsum",
     [](const Inputs& x) { return einsum("ij,jk->ik", {x[0], x[1]}); },
     {{2, 3}, {3, 4}},
     -2,
     2,
     true},
    {"einsum",
     [](const Inputs& x) { return einsum("bij,bkj->bki", {x[0], x[1]}); },
     {{2, 2, 3}, {2, 4, 3}}},
    {"einsum",  // a diagonal, twice differentiable
     [](const Inputs& x) { return einsum("ii->i", {x[0]}) * einsum("ii", {x[0]}); },
     {{3, 3}},
     -2,
     2,
     true},
    {"einsum",  // a repeated label with another operand, implicit output
     [](const Inputs& x) { return einsum("iji,jk", {x[0], x[1]}); },
     {{3, 2, 3}, {2, 4}}},
    {"einsum",  // ellipses broadcast; a size-1 label broadcasts
     [](const Inputs& x) { return einsum("...ij,...j->...i", {x[0], x[1]}); },
     {{2, 1, 3, 2}, {4, 1}}},
    {"einsum",
     [](const Inputs& x) {
       return einsum("ij,jk,kl->il", {x[0], x[1], x[2]}) + einsum("ijk->", {x[3]});
     },
     {{2, 3}, {3, 2}, {2, 3}, {2, 2, 2}},
     -2,
     2,
     true},
});

}  // namespace
}  // namespace ember::testing
