#include "ember/examples/models/resnet.h"

#include <utility>

namespace ember::models {

namespace {

nn::Conv2d conv3x3(int64_t in, int64_t out, int64_t stride = 1) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}

nn::Conv2d conv1x1(int64_t in, int64_t out, int64_t stride = 1) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false));
}

// The identity of a block's input: through downsample when there is one.
Tensor identity(const Tensor& x, const nn::Sequential& downsample) { return downsample ? downsample(x) : x; }

}  // namespace

BasicBlockImpl::BasicBlockImpl(int64_t inplanes, int64_t planes, int64_t stride, nn::Sequential downsample)
    : Module("BasicBlock") {
  conv1 = register_module("conv1", conv3x3(inplanes, planes, stride));
  bn1 = register_module("bn1", nn::BatchNorm2d(planes));
  conv2 = register_module("conv2", conv3x3(planes, planes));
  bn2 = register_module("bn2", nn::BatchNorm2d(planes));
  if (downsample) this->downsample = register_module("downsample", std::move(downsample));
}

Tensor BasicBlockImpl::forward(const Tensor& x) {
  Tensor out = bn1->forward_relu(conv1(x));
  return bn2->forward_relu(conv2(out), identity(x, downsample));
}

BottleneckImpl::BottleneckImpl(int64_t inplanes, int64_t planes, int64_t stride, nn::Sequential downsample)
    : Module("Bottleneck") {
  conv1 = register_module("conv1", conv1x1(inplanes, planes));
  bn1 = register_module("bn1", nn::BatchNorm2d(planes));
  conv2 = register_module("conv2", conv3x3(planes, planes, stride));
  bn2 = register_module("bn2", nn::BatchNorm2d(planes));
  conv3 = register_module("conv3", conv1x1(planes, planes * kExpansion));
  bn3 = register_module("bn3", nn::BatchNorm2d(planes * kExpansion));
  if (downsample) this->downsample = register_module("downsample", std::move(downsample));
}

Tensor BottleneckImpl::forward(const Tensor& x) {
  Tensor out = bn1->forward_relu(conv1(x));
  out = bn2->forward_relu(conv2(out));
  return bn3->forward_relu(conv3(out), identity(x, downsample));
}

ResNetImpl::ResNetImpl(ResNetBlock block, std::array<int64_t, 4> layers, const ResNetOptions& options)
    : Module("ResNet") {
  for (int64_t n : layers)
    EMBER_CHECK(n > 0, "ResNet: every stage needs a block, got layers {", layers[0], ", ", layers[1], ", ",
                layers[2], ", ", layers[3], "}");
  EMBER_CHECK(options.num_classes() > 0, "ResNet: num_classes must be positive, got ", options.num_classes());
  EMBER_CHECK(options.in_channels() > 0, "ResNet: in_channels must be positive, got ", options.in_channels());
  in_channels_ = options.in_channels();
  if (options.small_input_stem()) {
    conv1 = register_module("conv1", conv3x3(in_channels_, 64));
  } else {
    conv1 = register_module(
        "conv1", nn::Conv2d(nn::Conv2dOptions(in_channels_, 64, 7).stride(2).padding(3).bias(false)));
  }
  bn1 = register_module("bn1", nn::BatchNorm2d(64));
  if (!options.small_input_stem())
    maxpool = register_module("maxpool", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
  layer1 = register_module("layer1", make_layer(block, 64, layers[0], 1));
  layer2 = register_module("layer2", make_layer(block, 128, layers[1], 2));
  layer3 = register_module("layer3", make_layer(block, 256, layers[2], 2));
  layer4 = register_module("layer4", make_layer(block, 512, layers[3], 2));
  avgpool = register_module("avgpool", nn::AdaptiveAvgPool2d(1));
  fc = register_module("fc", nn::Linear(inplanes_, options.num_classes()));

  NoGradGuard no_grad;
  for (const auto& m : modules(/*include_self=*/false)) {
    if (auto* conv = dynamic_cast<nn::Conv2dImpl*>(m.get()))
      nn::init::kaiming_normal_(conv->weight, 0, "fan_out", "relu");
    // BatchNorm2d starts at weight 1, bias 0 already.
  }
  if (options.zero_init_residual()) {
    for (const auto& m : modules(/*include_self=*/false)) {
      if (auto* b = dynamic_cast<BottleneckImpl*>(m.get())) nn::init::zeros_(b->bn3->weight);
      if (auto* b = dynamic_cast<BasicBlockImpl*>(m.get())) nn::init::zeros_(b->bn2->weight);
    }
  }
}

nn::Sequential ResNetImpl::make_layer(ResNetBlock block, int64_t planes, int64_t blocks, int64_t stride) {
  const bool basic = block == ResNetBlock::Basic;
  const int64_t expansion = basic ? BasicBlockImpl::kExpansion : BottleneckImpl::kExpansion;
  nn::Sequential layer;
  auto add = [&](int64_t s, nn::Sequential downsample) {
    if (basic)
      layer->push_back(BasicBlock(inplanes_, planes, s, std::move(downsample)));
    else
      layer->push_back(Bottleneck(inplanes_, planes, s, std::move(downsample)));
    inplanes_ = planes * expansion;
  };
  nn::Sequential downsample{nullptr};
  if (stride != 1 || inplanes_ != planes * expansion)
    downsample =
        nn::Sequential(conv1x1(inplanes_, planes * expansion, stride), nn::BatchNorm2d(planes * expansion));
  add(stride, std::move(downsample));
  for (int64_t i = 1; i < blocks; ++i) add(1, nn::Sequential(nullptr));
  return layer;
}

Tensor ResNetImpl::forward(const Tensor& x) {
  EMBER_CHECK(x.dim() == 4 && x.size(1) == in_channels_, "ResNet: expected input [N, ", in_channels_,
              ", H, W], got ", x.sizes());
  Tensor out = bn1->forward_relu(conv1(x));
  if (maxpool) out = maxpool(out);
  for (const nn::Sequential& stage : {layer1, layer2, layer3, layer4})
    out = gradient_checkpointing_ && is_training()
              ? autograd::checkpoint([stage](const Tensor& t) { return stage(t); }, out)
              : stage(out);
  return fc(avgpool(out).flatten(1));
}

ResNet resnet18(const ResNetOptions& options) {
  return ResNet(ResNetBlock::Basic, std::array<int64_t, 4>{2, 2, 2, 2}, options);
}
ResNet resnet34(const ResNetOptions& options) {
  return ResNet(ResNetBlock::Basic, std::array<int64_t, 4>{3, 4, 6, 3}, options);
}
ResNet resnet50(const ResNetOptions& options) {
  return ResNet(ResNetBlock::Bottleneck, std::array<int64_t, 4>{3, 4, 6, 3}, options);
}
ResNet resnet101(const ResNetOptions& options) {
  return ResNet(ResNetBlock::Bottleneck, std::array<int64_t, 4>{3, 4, 23, 3}, options);
}

}  // namespace ember::models
