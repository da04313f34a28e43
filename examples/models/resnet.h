#pragma once

// ResNet as torchvision.models.resnet builds it (v1.5: the stride of a Bottleneck is on its 3x3
// convolution), with torchvision's module names, so a torchvision state_dict maps 1:1: conv1, bn1,
// layer1.0.conv1, ..., layer1.0.downsample.0 (1x1 conv) and .1 (BatchNorm2d), ..., fc.
//
//   auto model = models::resnet50(models::ResNetOptions().num_classes(10));
//   Tensor logits = model(images);  // images [N, 3, H, W] -> [N, num_classes]
//
// Initialized as torchvision: convolutions kaiming_normal (fan_out, relu), BatchNorm weight 1 and
// bias 0, fc as nn::Linear's default; with zero_init_residual the last BatchNorm of each residual
// branch starts at 0, so that each block starts as the identity.
//
// For small images (CIFAR's 32x32, Fashion-MNIST's 28x28) small_input_stem replaces the 7x7
// stride-2 convolution and the max-pool by one 3x3 stride-1 convolution, as CIFAR ResNets do:
// the stem otherwise shrinks a 28x28 image to 7x7 before the first block. The names stay
// torchvision's (conv1, bn1), so only conv1's weight has another shape.
//
// The stem's and the blocks' BatchNorms (not a downsample's) run with the ReLU after them and the
// residual join fused in (BatchNorm2d::forward_relu): their own outputs never exist, so forward
// hooks on them do not run; hooks on convolutions, blocks, stages and fc do.
#include <array>
#include <cstdint>

#include <ember/ember.h>

namespace ember::models {

struct ResNetOptions {
  EMBER_ARG(int64_t, num_classes) = 1000;
  EMBER_ARG(bool, zero_init_residual) = false;
  EMBER_ARG(int64_t, in_channels) = 3;  // 1 for grayscale images
  EMBER_ARG(bool, small_input_stem) = false;
};

// Two 3x3 convolutions; expansion 1.
class BasicBlockImpl : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 1;
  // `downsample` (empty for none) maps the input onto the output's shape for the residual.
  BasicBlockImpl(int64_t inplanes, int64_t planes, int64_t stride, nn::Sequential downsample);
  Tensor forward(const Tensor& x);

  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  nn::Sequential downsample{nullptr};
};
EMBER_MODULE(BasicBlock);

// 1x1 down to `planes`, 3x3 with the stride, 1x1 up to 4 * planes; expansion 4.
class BottleneckImpl : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 4;
  BottleneckImpl(int64_t inplanes, int64_t planes, int64_t stride, nn::Sequential downsample);
  Tensor forward(const Tensor& x);

  nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  nn::Sequential downsample{nullptr};
};
EMBER_MODULE(Bottleneck);

enum class ResNetBlock { Basic, Bottleneck };

class ResNetImpl : public nn::Module {
 public:
  // `layers`: blocks in each of the four stages (resnet50: {3, 4, 6, 3}).
  ResNetImpl(ResNetBlock block, std::array<int64_t, 4> layers, const ResNetOptions& options = {});
  Tensor forward(const Tensor& x);
  // Recompute each stage's activations in backward instead of keeping them (training only;
  // autograd::checkpoint). As in PyTorch, BatchNorm's running statistics are then updated by the
  // recomputation too.
  void set_gradient_checkpointing(bool on) { gradient_checkpointing_ = on; }

  nn::Conv2d conv1{nullptr};
  nn::BatchNorm2d bn1{nullptr};
  nn::MaxPool2d maxpool{nullptr};  // none with small_input_stem
  nn::Sequential layer1{nullptr}, layer2{nullptr}, layer3{nullptr}, layer4{nullptr};
  nn::AdaptiveAvgPool2d avgpool{nullptr};
  nn::Linear fc{nullptr};

 private:
  nn::Sequential make_layer(ResNetBlock block, int64_t planes, int64_t blocks, int64_t stride);
  int64_t inplanes_ = 64;
  int64_t in_channels_;
  bool gradient_checkpointing_ = false;
};
EMBER_MODULE(ResNet);

ResNet resnet18(const ResNetOptions& options = {});
ResNet resnet34(const ResNetOptions& options = {});
ResNet resnet50(const ResNetOptions& options = {});
ResNet resnet101(const ResNetOptions& options = {});

}  // namespace ember::models
