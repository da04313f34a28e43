// examples/models: ResNet against torchvision's layout and numbers, BertLike against
// tools/bench/torch_transformer_bench.py's. References from PyTorch 2.15 (CPU) running
// tools/bench/torch_scaling_bench.py's ResNet, which is torchvision.models.ResNet without its
// groups/width/dilation options (same parameter counts, names and order).
#include <cmath>

#include "ember/examples/models/bert.h"
#include "ember/examples/models/resnet.h"
#include "nn/nn_test_util.h"

namespace ember::testing {
namespace {

namespace models = ember::models;

int64_t count_parameters(const nn::Module& m) {
  int64_t n = 0;
  for (const Tensor& p : m.parameters()) n += p.numel();
  return n;
}

// for i, (name, p) in enumerate(m.named_parameters()):
//   p.copy_(wave(list(p.shape), 0.3 + 0.01 * i, 0.2 * i) * 0.2)
void fill(nn::Module& m) {
  m.to(kFloat64);
  int i = 0;
  for (const auto& [name, p] : m.named_parameters()) {
    assign(p, wave(p.sizes(), 0.3 + 0.01 * i, 0.2 * i) * 0.2);
    ++i;
  }
}

// One test per big model: initializing ResNet-50 draws 25.6M normal samples, seconds on the CPU,
// and ctest runs every test in a process of its own.
TEST(ModelsResNet, ResNet50IsTorchvisions) {
  manual_seed(0);
  models::ResNet r50 = models::resnet50();
  // sum(p.numel() for p in torchvision.models.resnet50().parameters()), len(state_dict())
  EXPECT_EQ(count_parameters(*r50), 25557032);
  auto sd = r50->state_dict();
  EXPECT_EQ(sd.size(), 320u);
  const std::vector<std::pair<std::string, std::vector<int64_t>>> expected{
      {"conv1.weight", {64, 3, 7, 7}},
      {"bn1.running_var", {64}},
      {"layer1.0.conv1.weight", {64, 64, 1, 1}},
      {"layer1.0.conv3.weight", {256, 64, 1, 1}},
      {"layer1.0.downsample.0.weight", {256, 64, 1, 1}},
      {"layer1.0.downsample.1.running_mean", {256}},
      {"layer2.0.conv2.weight", {128, 128, 3, 3}},
      {"layer3.5.bn3.bias", {1024}},
      {"layer4.2.bn3.weight", {2048}},
      {"fc.weight", {1000, 2048}},
      {"fc.bias", {1000}}};
  for (const auto& [name, shape] : expected) {
    ASSERT_TRUE(sd.contains(name)) << name;
    EXPECT_EQ(sd[name].sizes().vec(), shape) << name;
  }
  EXPECT_TRUE(sd.contains("layer4.2.bn3.num_batches_tracked"));
  EXPECT_FALSE(sd.contains("layer1.1.downsample.0.weight"));
  // ResNet v1.5: a Bottleneck strides in its 3x3 convolution.
  EXPECT_EQ(r50->layer2->at<models::BottleneckImpl>(0).conv2->options.stride()[0], 2);
  EXPECT_EQ(r50->layer2->at<models::BottleneckImpl>(0).conv1->options.stride()[0], 1);

  // kaiming_normal_(mode="fan_out", nonlinearity="relu"): std = sqrt(2 / (out * kh * kw)).
  auto check_std = [](const Tensor& w, double expected) {
    double mean = w.mean().item<double>(), std = w.std().item<double>();
    EXPECT_NEAR(mean, 0, 4 * expected / std::sqrt(static_cast<double>(w.numel())));
    EXPECT_NEAR(std, expected, 0.03 * expected);
  };
  check_std(r50->conv1->weight, std::sqrt(2.0 / (64 * 49)));
  check_std(r50->layer3->at<models::BottleneckImpl>(0).conv2->weight, std::sqrt(2.0 / (256 * 9)));
  check_std(r50->layer4->at<models::BottleneckImpl>(1).conv3->weight, std::sqrt(2.0 / 2048));
  int bn_tensors = 0;
  for (const auto& [name, t] : r50->named_parameters()) {
    if (name.find("bn") == std::string::npos && name.find("downsample.1") == std::string::npos) continue;
    EXPECT_TRUE(t.eq(name.ends_with("weight") ? 1.0 : 0.0).all().item<bool>()) << name;
    ++bn_tensors;
  }
  EXPECT_EQ(bn_tensors, 2 * 53);  // 53 BatchNorm2d layers

  NoGradGuard no_grad;
  r50->eval();
  EXPECT_TRUE(r50(randn({2, 3, 64, 64})).sizes().equals({2, 1000}));
}

TEST(ModelsResNet, ResNet18IsTorchvisions) {
  models::ResNet r18 = models::resnet18(models::ResNetOptions().num_classes(10));
  // torchvision.models.resnet18(): 11689512 parameters, 122 state_dict entries; fc [1000, 512] and
  // [1000] are [10, 512] and [10] here.
  EXPECT_EQ(count_parameters(*r18), 11689512 - 990 * 513);
  EXPECT_EQ(r18->state_dict().size(), 122u);
  auto params = r18->named_parameters();
  EXPECT_EQ(params.keys()[3], "layer1.0.conv1.weight");
  EXPECT_FALSE(params.contains("layer1.0.downsample.0.weight"));
  EXPECT_TRUE(params["layer2.0.downsample.0.weight"].sizes().equals({128, 64, 1, 1}));
  EXPECT_TRUE(params["layer4.1.conv2.weight"].sizes().equals({512, 512, 3, 3}));
  EXPECT_TRUE(params["fc.weight"].sizes().equals({10, 512}));
  EXPECT_TRUE(r18(randn({2, 3, 64, 64})).sizes().equals({2, 10}));
}

TEST(ModelsResNet, SmallInputStemKeepsTheResolution) {
  // Grayscale 28x28 in, 3x3 stride-1 stem and no max-pool: layer1 sees 28x28, layer4 4x4.
  models::ResNet r18 =
      models::resnet18(models::ResNetOptions().num_classes(10).in_channels(1).small_input_stem(true));
  auto params = r18->named_parameters();
  EXPECT_TRUE(params["conv1.weight"].sizes().equals({64, 1, 3, 3}));
  EXPECT_FALSE(r18->maxpool);
  EXPECT_EQ(r18->state_dict().size(), 122u);  // the same keys as torchvision's
  Tensor x = randn({2, 1, 28, 28});
  EXPECT_TRUE(r18->layer1(relu(r18->bn1(r18->conv1(x)))).sizes().equals({2, 64, 28, 28}));
  EXPECT_TRUE(r18(x).sizes().equals({2, 10}));
  EXPECT_THROW(r18(randn({2, 3, 28, 28})), Error);
  EXPECT_THROW(models::resnet18(models::ResNetOptions().in_channels(0)), Error);
}

TEST(ModelsResNet, MatchesPyTorch) {
  // m = ResNet(BasicBlock or Bottleneck, [1, 1, 1, 1], num_classes=5).double(); fill(m) (training
  // mode); m(wave([2, 3, 64, 64], 0.37, 0.1)); then the running_var of layer4[0].downsample[1].
  // Built with zero_init_residual, checked before fill() overwrites everything.
  struct Case {
    models::ResNetBlock block;
    std::vector<std::vector<double>> logits;
    double running_var_sum;
  };
  const std::vector<Case> cases{
      {models::ResNetBlock::Basic,
       {{-0.7490107809041104, 0.8684722425169623, 1.3211123939403142, -0.19833371944098127,
         -1.3959816598618942},
        {-0.857170970600553, 0.6893531574562761, 1.3585266174166775, -0.0044372844998387395,
         -1.3568133648875131}},
       461.345011537794},
      {models::ResNetBlock::Bottleneck,
       {{0.7310633815146401, 0.564720138987391, 0.5115409958714436, 0.5135544232792676, 0.47232454248796485},
        {0.7408303719930855, 0.5287355899281112, 0.43031455780688926, 0.38823650933082005,
         0.3046900350217182}},
       1858.67006833816}};
  for (const Case& c : cases) {
    models::ResNet m(c.block, std::array<int64_t, 4>{1, 1, 1, 1},
                     models::ResNetOptions().num_classes(5).zero_init_residual(true));
    const bool basic = c.block == models::ResNetBlock::Basic;
    auto last_bn =
        basic ? m->layer2->at<models::BasicBlockImpl>(0).bn2 : m->layer2->at<models::BottleneckImpl>(0).bn3;
    auto first_bn =
        basic ? m->layer2->at<models::BasicBlockImpl>(0).bn1 : m->layer2->at<models::BottleneckImpl>(0).bn1;
    EXPECT_TRUE(last_bn->weight.eq(0).all().item<bool>());
    EXPECT_TRUE(first_bn->weight.eq(1).all().item<bool>());
    fill(*m);
    Tensor y = m(wave({2, 3, 64, 64}, 0.37, 0.1));
    EXPECT_CLOSE(y, f64({c.logits[0], c.logits[1]}), Tolerance{1e-9, 1e-10});
    Tensor var = m->named_buffers()["layer4.0.downsample.1.running_var"];
    EXPECT_NEAR(var.sum().item<double>(), c.running_var_sum, 1e-9 * c.running_var_sum);
  }
}

TEST(ModelsResNet, ChannelsLastTrainsAsContiguous) {
  // model.to(memory_format=torch.channels_last) with channels-last images: the same logits,
  // running statistics and gradients as the NCHW run, the weights' gradients channels-last, and
  // (the CPU convolutions running NHWC) channels-last activations up to the pooling.
  auto make = [] {
    models::ResNet m(models::ResNetBlock::Bottleneck, std::array<int64_t, 4>{1, 1, 1, 1},
                     models::ResNetOptions().num_classes(5));
    fill(*m);
    return m;
  };
  models::ResNet plain = make(), nhwc = make();
  nhwc->to(MemoryFormat::ChannelsLast);
  Tensor x = wave({2, 3, 64, 64}, 0.37, 0.1);
  Tensor y = plain(x), y_nhwc = nhwc(x.contiguous(MemoryFormat::ChannelsLast));
  EXPECT_CLOSE(y_nhwc, y, Tolerance{1e-12, 1e-12});
  y.square().sum().backward();
  y_nhwc.square().sum().backward();
  auto grads = plain->named_parameters(), grads_nhwc = nhwc->named_parameters();
  for (const auto& [name, p] : grads) {
    SCOPED_TRACE(name);
    const Tensor& q = grads_nhwc[name];
    // The NHWC kernels sum in another order, and the BatchNorm backwards cancel the sums to
    // ~1e-9 of the gradients' scale.
    EXPECT_CLOSE(q.grad(), p.grad(), Tolerance{1e-10, 1e-9 * p.grad().abs().max().item<double>()});
    if (q.dim() == 4) {
      EXPECT_TRUE(q.grad().is_contiguous(MemoryFormat::ChannelsLast));
    }
  }
  EXPECT_CLOSE(nhwc->named_buffers()["layer4.0.downsample.1.running_var"],
               plain->named_buffers()["layer4.0.downsample.1.running_var"], Tolerance{1e-12, 1e-12});
  {
    NoGradGuard no_grad;  // (after the checks: this forward updates the running statistics)
    Tensor a = nhwc->conv1(x.contiguous(MemoryFormat::ChannelsLast));
    EXPECT_TRUE(a.is_contiguous(MemoryFormat::ChannelsLast) && !a.is_contiguous());
    a = nhwc->maxpool(relu(nhwc->bn1(a)));
    for (nn::Sequential* layer : {&nhwc->layer1, &nhwc->layer2, &nhwc->layer3, &nhwc->layer4}) {
      a = (*layer)(a);
      EXPECT_TRUE(a.is_contiguous(MemoryFormat::ChannelsLast) && !a.is_contiguous()) << a.strides();
    }
  }
}

TEST(ModelsResNet, Errors) {
  models::ResNet r18(models::ResNetBlock::Basic, std::array<int64_t, 4>{1, 1, 1, 1});
  EXPECT_EMBER_ERROR(r18(randn({2, 4, 32, 32})), "ResNet", "[N, 3, H, W]", "[2, 4, 32, 32]");
  EXPECT_EMBER_ERROR(r18(randn({3, 32, 32})), "ResNet", "[3, 32, 32]");
  EXPECT_EMBER_ERROR(models::resnet18(models::ResNetOptions().num_classes(0)), "ResNet", "num_classes", "0");
  EXPECT_EMBER_ERROR(models::ResNet(models::ResNetBlock::Basic, std::array<int64_t, 4>{2, 0, 2, 2}), "ResNet",
                     "{2, 0, 2, 2}");
}

models::BertLikeOptions tiny_bert() {
  return models::BertLikeOptions()
      .vocab_size(50)
      .max_positions(16)
      .d_model(32)
      .heads(4)
      .dim_feedforward(64)
      .layers(2);
}

TEST(ModelsBertLike, ParametersAreTorchTransformerBenchs) {
  // BertLike(Namespace(vocab=50, seq=16, d_model=32, heads=4, ffn=64, layers=2)): parameter count,
  // number and names.
  models::BertLike m(tiny_bert());
  auto params = m->named_parameters();
  EXPECT_EQ(count_parameters(*m), 20914);
  ASSERT_EQ(params.size(), 30u);
  const std::vector<std::string> first{"tok.weight",
                                       "pos.weight",
                                       "norm.weight",
                                       "norm.bias",
                                       "layers.0.self_attn.in_proj_weight",
                                       "layers.0.self_attn.in_proj_bias",
                                       "layers.0.self_attn.out_proj.weight",
                                       "layers.0.self_attn.out_proj.bias",
                                       "layers.0.linear1.weight",
                                       "layers.0.linear1.bias",
                                       "layers.0.linear2.weight",
                                       "layers.0.linear2.bias"};
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(params.keys()[i], first[i]);
  EXPECT_EQ(params.keys()[27], "layers.1.norm2.bias");
  EXPECT_EQ(params.keys()[29], "head.bias");
}

// Pipeline stages of a 3-layer model: the first holds the embeddings and layers 0-1, the second
// layer 2 and the head, each with the whole model's keys and values (the same seed); run in turn
// they give its loss.
TEST(ModelsBertLike, PipelineStagesSplitTheWholeModel) {
  manual_seed(5);
  models::BertLike whole(tiny_bert().layers(3).dropout(0));
  manual_seed(5);
  models::BertLike first(tiny_bert().layers(3).dropout(0).pipeline_stage(0, 2));
  manual_seed(5);
  models::BertLike last(tiny_bert().layers(3).dropout(0).pipeline_stage(1, 2));
  auto all = whole->named_parameters();
  size_t held = 0;
  for (const models::BertLike& stage : {first, last}) {
    for (const auto& [key, p] : stage->named_parameters()) {
      ASSERT_TRUE(all.contains(key)) << key;
      EXPECT_TRUE(equal(p, all[key])) << key;
      ++held;
    }
  }
  EXPECT_EQ(held, all.size());
  EXPECT_TRUE(first->named_parameters().contains("layers.1.linear1.weight"));
  EXPECT_TRUE(last->named_parameters().contains("layers.2.linear1.weight"));
  EXPECT_TRUE(last->named_parameters().contains("head.weight"));

  Tensor ids = randint(0, 50, {2, 16}, kInt64), labels = randint(0, 50, {2, 16}, kInt64);
  Tensor expected = whole(ids, arange(16, kInt64), labels);
  EXPECT_TRUE(
      allclose(last->loss(last->forward_stage(first->forward_stage(ids)), labels), expected, 1e-6, 1e-6));
  EXPECT_EMBER_ERROR(first(ids, arange(16, kInt64), labels), "BertLike::forward", "pipeline stage 0 of 2");
  EXPECT_EMBER_ERROR(first->loss(ids, labels), "BertLike::loss", "not on stage 0 of 2");
  EXPECT_EMBER_ERROR(models::BertLike(tiny_bert().pipeline_stage(0, 3)), "BertLike", "stage 0 of 3",
                     "2 layers");
}

TEST(ModelsBertLike, MatchesPyTorch) {
  // m = BertLike(...tiny...).double().eval(); fill(m); ids = (arange(32) * 7 % 50).view(2, 16);
  // labels = (arange(32) * 3 % 50).view(2, 16); m(ids, arange(16), labels) -> 4.04473125408858.
  models::BertLike m(tiny_bert());
  fill(*m);
  m->eval();
  auto tokens = [](int64_t step) {  // (arange(32) * step % 50).view(2, 16)
    std::vector<int64_t> v(32);
    for (int64_t i = 0; i < 32; ++i) v[i] = i * step % 50;
    return tensor(v, kInt64).view({2, 16});
  };
  Tensor ids = tokens(7), labels = tokens(3);
  Tensor positions = arange(16);
  EXPECT_NEAR(m(ids, positions, labels).item<double>(), 4.04473125408858, 1e-10);
  // Checkpointed layers give the same loss.
  EXPECT_NEAR(m(ids, positions, labels, true).item<double>(), 4.04473125408858, 1e-10);
}

}  // namespace
}  // namespace ember::testing
