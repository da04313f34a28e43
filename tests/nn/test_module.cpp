// nn::Module: registration, traversal and key names (against PyTorch's for the same module
// tree), train/eval, to(dtype), zero_grad, state_dict / load_state_dict, printing, holders.
#include <sstream>

#include "ember/nn/activation.h"
#include "ember/nn/container.h"
#include "ember/nn/conv.h"
#include "ember/nn/dropout.h"
#include "ember/nn/init.h"
#include "ember/nn/linear.h"
#include "ember/nn/normalization.h"
#include "ember/nn/pooling.h"
#include "nn_test_util.h"

namespace ember::testing {
namespace {

namespace nn = ember::nn;

// A ResNet-style block and a small network, as in the PyTorch code quoted in each test:
//   class Block(nn.Module):
//     def __init__(self, cin, cout):
//       self.conv1 = nn.Conv2d(cin, cout, 3, padding=1, bias=False); self.bn1 = nn.BatchNorm2d(cout)
//       self.relu = nn.ReLU()
//       self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False); self.bn2 = nn.BatchNorm2d(cout)
//       self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout))
//   class Net(nn.Module):
//     def __init__(self):
//       self.stem = nn.Conv2d(3, 4, 3, padding=1)
//       self.layer1 = nn.Sequential(Block(4, 8), Block(8, 8))
//       self.pool = nn.AdaptiveAvgPool2d(1); self.flatten = nn.Flatten(); self.fc = nn.Linear(8, 10)
struct BlockImpl : nn::Module {
  BlockImpl(int64_t cin, int64_t cout)
      : conv1(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(cin, cout, 3).padding(1).bias(false)))),
        bn1(register_module("bn1", nn::BatchNorm2d(cout))),
        relu(register_module("relu", nn::ReLU())),
        conv2(register_module("conv2", nn::Conv2d(nn::Conv2dOptions(cout, cout, 3).padding(1).bias(false)))),
        bn2(register_module("bn2", nn::BatchNorm2d(cout))),
        downsample(register_module(
            "downsample",
            nn::Sequential(nn::Conv2d(nn::Conv2dOptions(cin, cout, 1).bias(false)), nn::BatchNorm2d(cout)))) {
  }

  Tensor forward(const Tensor& x) { return relu(bn2(conv2(relu(bn1(conv1(x))))) + downsample(x)); }

  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::ReLU relu;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  nn::Sequential downsample;
};
EMBER_MODULE(Block);

struct NetImpl : nn::Module {
  NetImpl() {
    stem = register_module("stem", nn::Conv2d(nn::Conv2dOptions(3, 4, 3).padding(1)));
    layer1 = register_module("layer1", nn::Sequential(Block(4, 8), Block(8, 8)));
    pool = register_module("pool", nn::AdaptiveAvgPool2d(1));
    flatten = register_module("flatten", nn::Flatten());
    fc = register_module("fc", nn::Linear(8, 10));
  }
  Tensor forward(const Tensor& x) { return fc(flatten(pool(layer1(stem(x))))); }

  nn::Conv2d stem{nullptr};
  nn::Sequential layer1{nullptr};
  nn::AdaptiveAvgPool2d pool{nullptr};
  nn::Flatten flatten{nullptr};
  nn::Linear fc{nullptr};
};
EMBER_MODULE(Net);

std::vector<std::string> block_keys(const std::string& p, bool buffers_only = false) {
  std::vector<std::string> keys;
  for (std::string bn : {"bn1", "bn2", "downsample.1"}) {
    std::string conv = bn == "bn1" ? "conv1" : bn == "bn2" ? "conv2" : "downsample.0";
    if (!buffers_only) keys.insert(keys.end(), {p + conv + ".weight", p + bn + ".weight", p + bn + ".bias"});
    keys.insert(keys.end(),
                {p + bn + ".running_mean", p + bn + ".running_var", p + bn + ".num_batches_tracked"});
  }
  return keys;
}

TEST(NnModule, StateDictKeysMatchPyTorch) {
  Net net;
  // list(net.state_dict().keys())
  std::vector<std::string> expected = {"stem.weight",
                                       "stem.bias",
                                       "layer1.0.conv1.weight",
                                       "layer1.0.bn1.weight",
                                       "layer1.0.bn1.bias",
                                       "layer1.0.bn1.running_mean",
                                       "layer1.0.bn1.running_var",
                                       "layer1.0.bn1.num_batches_tracked",
                                       "layer1.0.conv2.weight",
                                       "layer1.0.bn2.weight",
                                       "layer1.0.bn2.bias",
                                       "layer1.0.bn2.running_mean",
                                       "layer1.0.bn2.running_var",
                                       "layer1.0.bn2.num_batches_tracked",
                                       "layer1.0.downsample.0.weight",
                                       "layer1.0.downsample.1.weight",
                                       "layer1.0.downsample.1.bias",
                                       "layer1.0.downsample.1.running_mean",
                                       "layer1.0.downsample.1.running_var",
                                       "layer1.0.downsample.1.num_batches_tracked",
                                       "layer1.1.conv1.weight",
                                       "layer1.1.bn1.weight",
                                       "layer1.1.bn1.bias",
                                       "layer1.1.bn1.running_mean",
                                       "layer1.1.bn1.running_var",
                                       "layer1.1.bn1.num_batches_tracked",
                                       "layer1.1.conv2.weight",
                                       "layer1.1.bn2.weight",
                                       "layer1.1.bn2.bias",
                                       "layer1.1.bn2.running_mean",
                                       "layer1.1.bn2.running_var",
                                       "layer1.1.bn2.num_batches_tracked",
                                       "layer1.1.downsample.0.weight",
                                       "layer1.1.downsample.1.weight",
                                       "layer1.1.downsample.1.bias",
                                       "layer1.1.downsample.1.running_mean",
                                       "layer1.1.downsample.1.running_var",
                                       "layer1.1.downsample.1.num_batches_tracked",
                                       "fc.weight",
                                       "fc.bias"};
  EXPECT_EQ(keys_of(net->state_dict()), expected);
  // [k for k, _ in net.named_parameters()]: the same without the buffers.
  std::vector<std::string> params;
  for (const std::string& k : expected)
    if (!k.ends_with("running_mean") && !k.ends_with("running_var") && !k.ends_with("num_batches_tracked"))
      params.push_back(k);
  EXPECT_EQ(keys_of(net->named_parameters()), params);
  EXPECT_EQ(net->parameters().size(), 22u);
  // [k for k, _ in net.named_buffers()]
  std::vector<std::string> buffers = block_keys("layer1.0.", true), second = block_keys("layer1.1.", true);
  buffers.insert(buffers.end(), second.begin(), second.end());
  EXPECT_EQ(keys_of(net->named_buffers()), buffers);
  // [k for k, _ in net.named_modules()] and named_children()
  std::vector<std::string> modules = {"", "stem", "layer1"};
  for (std::string b : {"layer1.0", "layer1.1"})
    for (std::string m :
         {"", ".conv1", ".bn1", ".relu", ".conv2", ".bn2", ".downsample", ".downsample.0", ".downsample.1"})
      modules.push_back(b + m);
  modules.insert(modules.end(), {"pool", "flatten", "fc"});
  EXPECT_EQ(net->named_modules().keys(), modules);
  EXPECT_EQ(net->modules().size(), modules.size());
  EXPECT_EQ(net->named_modules("net", false).keys()[0], "net.stem");
  EXPECT_EQ(net->named_children().keys(),
            (std::vector<std::string>{"stem", "layer1", "pool", "flatten", "fc"}));
  EXPECT_EQ(net->children()[1].get(), net->layer1.get());
  EXPECT_EQ(keys_of(net->named_parameters(/*recurse=*/false)), std::vector<std::string>{});
  EXPECT_EQ(keys_of(net->fc->named_parameters(false)), (std::vector<std::string>{"weight", "bias"}));
  // The block runs: [2, 3, 6, 6] -> [2, 10].
  EXPECT_TRUE(net(randn({2, 3, 6, 6})).sizes().equals({2, 10}));
}

TEST(NnModule, PrintsLikePyTorch) {
  // repr(Block(4, 8)), with C++'s true/false
  std::ostringstream os;
  os << Block(4, 8);
  EXPECT_EQ(
      os.str(),
      "Block(\n"
      "  (conv1): Conv2d(4, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=false)\n"
      "  (bn1): BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=true, bias=true, track_running_stats=true)\n"
      "  (relu): ReLU()\n"
      "  (conv2): Conv2d(8, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=false)\n"
      "  (bn2): BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=true, bias=true, track_running_stats=true)\n"
      "  (downsample): Sequential(\n"
      "    (0): Conv2d(4, 8, kernel_size=(1, 1), stride=(1, 1), bias=false)\n"
      "    (1): BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=true, bias=true, track_running_stats=true)\n"
      "  )\n"
      ")");
  auto repr = [](const nn::Module& m) {
    std::ostringstream s;
    s << m;
    return s.str();
  };
  // repr(...) of each of these in PyTorch
  EXPECT_EQ(repr(*nn::Linear(4, 2)), "Linear(in_features=4, out_features=2, bias=true)");
  EXPECT_EQ(repr(*nn::Conv1d(2, 4, 3)), "Conv1d(2, 4, kernel_size=(3,), stride=(1,))");
  EXPECT_EQ(repr(*nn::Conv2d(nn::Conv2dOptions(3, 8, {3, 5}).stride(2).padding(1).dilation(2).bias(false))),
            "Conv2d(3, 8, kernel_size=(3, 5), stride=(2, 2), padding=(1, 1), dilation=(2, 2), bias=false)");
  EXPECT_EQ(repr(*nn::Conv2d(nn::Conv2dOptions(4, 8, 3).groups(2).padding("same"))),
            "Conv2d(4, 8, kernel_size=(3, 3), stride=(1, 1), padding=same, groups=2)");
  EXPECT_EQ(repr(*nn::ConvTranspose2d(nn::ConvTranspose2dOptions(3, 2, 3).stride(2).output_padding(1))),
            "ConvTranspose2d(3, 2, kernel_size=(3, 3), stride=(2, 2), output_padding=(1, 1))");
  EXPECT_EQ(repr(*nn::BatchNorm1d(nn::BatchNormOptions(3).momentum(std::nullopt))),
            "BatchNorm1d(3, eps=1e-05, momentum=None, affine=true, bias=true, track_running_stats=true)");
  EXPECT_EQ(repr(*nn::LayerNorm(nn::LayerNormOptions({3, 4}))),
            "LayerNorm((3, 4), eps=1e-05, elementwise_affine=true, bias=true)");
  EXPECT_EQ(repr(*nn::GroupNorm(2, 4)), "GroupNorm(2, 4, eps=1e-05, affine=true, bias=true)");
  EXPECT_EQ(repr(*nn::RMSNorm(nn::RMSNormOptions({4}))), "RMSNorm((4,), eps=None, elementwise_affine=true)");
  EXPECT_EQ(repr(*nn::RMSNorm(nn::RMSNormOptions({4}).eps(1e-6))),
            "RMSNorm((4,), eps=1e-06, elementwise_affine=true)");
  EXPECT_EQ(repr(*nn::Dropout(0.1)), "Dropout(p=0.1)");
  EXPECT_EQ(repr(*nn::ReLU()), "ReLU()");
  EXPECT_EQ(repr(*nn::ReLU(true)), "ReLU(inplace=true)");
  EXPECT_EQ(repr(*nn::GELU(nn::GELUOptions().approximate("tanh"))), "GELU(approximate='tanh')");
  EXPECT_EQ(repr(*nn::Softmax(1)), "Softmax(dim=1)");
  EXPECT_EQ(repr(*nn::Identity()), "Identity()");
  EXPECT_EQ(repr(*nn::Flatten()), "Flatten(start_dim=1, end_dim=-1)");
  EXPECT_EQ(repr(*nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1))),
            "MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=false)");
  EXPECT_EQ(repr(*nn::AvgPool2d(2)), "AvgPool2d(kernel_size=2, stride=2, padding=0)");
  EXPECT_EQ(repr(*nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions({1, 2}))),
            "AdaptiveAvgPool2d(output_size=(1, 2))");
}

TEST(NnModule, NameComesFromTheClass) {
  EXPECT_EQ(Net()->name(), "Net");
  EXPECT_EQ(nn::Linear(1, 1)->name(), "Linear");
  struct Plain : nn::Module {};
  EXPECT_EQ(Plain().name(), "Plain");
}

TEST(NnModule, RegistrationErrors) {
  struct M : nn::Module {};
  M m;
  m.register_parameter("w", zeros({2}));
  EXPECT_TRUE(m.named_parameters()["w"].requires_grad());
  EXPECT_FALSE(m.register_parameter("frozen", zeros({2}), false).requires_grad());
  EXPECT_EMBER_ERROR(m.register_parameter("w", zeros({2})),
                     "register_parameter: \"w\" is already a parameter of M");
  EXPECT_EMBER_ERROR(m.register_buffer("w", zeros({2})), "register_buffer: \"w\" is already a parameter");
  EXPECT_EMBER_ERROR(m.register_module("w", nn::Linear(1, 1)),
                     "register_module: \"w\" is already a parameter");
  EXPECT_EMBER_ERROR(m.register_parameter("a.b", zeros({2})),
                     "register_parameter: name \"a.b\" must not contain a dot");
  EXPECT_EMBER_ERROR(m.register_buffer("", zeros({2})), "register_buffer: the name must not be empty");
  EXPECT_EMBER_ERROR(m.register_parameter("i", zeros({2}, kInt64)),
                     "register_parameter: parameter \"i\" has dtype int64");
  Tensor leaf = ones({2}).requires_grad_();
  EXPECT_EMBER_ERROR(m.register_parameter("y", leaf * 2),
                     "register_parameter: parameter \"y\" must be a leaf tensor");
  EXPECT_EMBER_ERROR(m.register_module("empty", nn::Linear(nullptr)),
                     "register_module: submodule \"empty\" is empty");
  // An undefined parameter is kept but never listed; an int64 buffer is fine.
  m.register_parameter("none", Tensor(), false);
  m.register_buffer("count", zeros({}, kInt64));
  EXPECT_EQ(keys_of(m.named_parameters()), (std::vector<std::string>{"w", "frozen"}));
  EXPECT_EQ(keys_of(m.state_dict()), (std::vector<std::string>{"w", "frozen", "count"}));
  // Listing itself needs a shared_ptr.
  EXPECT_EMBER_ERROR(m.modules(), "named_modules: M is not held by a shared_ptr");
  EXPECT_EQ(m.modules(false).size(), 0u);
}

TEST(NnModule, SharedParametersAndModulesAreListedOnce) {
  // Tied weights (as an embedding shared with an output layer): PyTorch lists them once in
  // parameters() but under both keys in state_dict().
  struct TiedImpl : nn::Module {
    TiedImpl() {
      a = register_module("a", nn::Linear(3, 3));
      b = register_module("b", nn::Linear(3, 3));
      b->register_parameter("shared", a->weight);
      shared = register_module("again", a);
    }
    nn::Linear a{nullptr}, b{nullptr}, shared{nullptr};
  };
  auto tied = std::make_shared<TiedImpl>();
  EXPECT_EQ(keys_of(tied->named_parameters()),
            (std::vector<std::string>{"a.weight", "a.bias", "b.weight", "b.bias"}));
  EXPECT_EQ(keys_of(tied->state_dict()),
            (std::vector<std::string>{"a.weight", "a.bias", "b.weight", "b.bias", "b.shared", "again.weight",
                                      "again.bias"}));
  EXPECT_EQ(tied->named_modules().keys(), (std::vector<std::string>{"", "a", "b"}));
}

TEST(NnModule, ApplyVisitsChildrenBeforeParents) {
  Net net;
  std::vector<std::string> names;
  net->apply([&](const std::string& path, nn::Module& m) { names.push_back(path + ":" + m.name()); });
  // PyTorch's apply: for child in children(): child.apply(fn); then fn(self).
  ASSERT_EQ(names.size(), 24u);
  EXPECT_EQ(names[0], "stem:Conv2d");
  EXPECT_EQ(names[1], "layer1.0.conv1:Conv2d");
  EXPECT_EQ(names[6], "layer1.0.downsample.0:Conv2d");
  EXPECT_EQ(names[8], "layer1.0.downsample:Sequential");
  EXPECT_EQ(names[9], "layer1.0:Block");
  EXPECT_EQ(names[19], "layer1:Sequential");
  EXPECT_EQ(names.back(), ":Net");
  // The usual use: re-initialise every Linear.
  net->apply([](nn::Module& m) {
    if (auto* lin = dynamic_cast<nn::LinearImpl*>(&m)) nn::init::zeros_(lin->weight);
  });
  EXPECT_CLOSE(net->fc->weight, zeros({10, 8}));
}

TEST(NnModule, TrainAndEvalAreRecursive) {
  Net net;
  EXPECT_TRUE(net->is_training());
  net->eval();
  for (const auto& m : net->modules()) EXPECT_FALSE(m->is_training()) << m->name();
  net->train();
  for (const auto& m : net->modules()) EXPECT_TRUE(m->is_training()) << m->name();
  net->layer1->train(false);
  EXPECT_TRUE(net->is_training());
  EXPECT_FALSE(net->layer1[1]->is_training());
}

TEST(NnModule, ToDtypeKeepsParameterIdentity) {
  Net net;
  std::vector<Tensor> params = net->parameters();  // what an optimizer would hold
  Tensor fc_weight = net->fc->weight;
  net(randn({1, 3, 4, 4})).sum().backward();
  Tensor before = fc_weight.clone();
  net->to(kFloat64);
  for (const auto& [name, p] : net->named_parameters()) {
    EXPECT_EQ(p.dtype(), kFloat64) << name;
    EXPECT_TRUE(p.requires_grad()) << name;
    EXPECT_TRUE(p.is_leaf()) << name;
    EXPECT_EQ(p.grad().dtype(), kFloat64) << name;
  }
  for (const auto& [name, b] : net->named_buffers())
    EXPECT_EQ(b.dtype(), name.ends_with("num_batches_tracked") ? kInt64 : kFloat64) << name;
  // The same tensors, now float64: the optimizer's handles and the layers' members see it.
  EXPECT_EQ(params[20].dtype(), kFloat64);
  EXPECT_TRUE(params[20].is_same(net->fc->weight));
  EXPECT_TRUE(fc_weight.is_same(net->fc->weight));
  EXPECT_CLOSE(fc_weight, before.to(kFloat64));
  // It still trains: gradients reach the same tensors.
  net->zero_grad();
  net(randn({1, 3, 4, 4}, kFloat64)).sum().backward();
  EXPECT_EQ(params[20].grad().dtype(), kFloat64);
  net->to(Device(kCPU));
  EXPECT_TRUE(params[20].is_same(net->fc->weight));
  EXPECT_EMBER_ERROR(net->to(kInt64), "Module::to: only floating point dtypes are allowed, got int64");
}

TEST(NnModule, ZeroGradAndRequiresGrad) {
  nn::Linear lin(3, 2);
  lin(randn({4, 3})).sum().backward();
  ASSERT_TRUE(lin->weight.grad().defined());
  lin->zero_grad(/*set_to_none=*/false);
  EXPECT_CLOSE(lin->weight.grad(), zeros({2, 3}));
  EXPECT_CLOSE(lin->bias.grad(), zeros({2}));
  lin->zero_grad();
  EXPECT_FALSE(lin->weight.grad().defined());
  lin->requires_grad_(false);
  EXPECT_FALSE(lin->weight.requires_grad());
  EXPECT_FALSE(lin(randn({4, 3})).requires_grad());
  lin->requires_grad_();
  EXPECT_TRUE(lin->bias.requires_grad());
}

TEST(NnModule, StateDictAliasesAndRoundTrips) {
  manual_seed(1);
  Net a, b;
  a->layer1(a->stem(randn({2, 3, 4, 4})));  // moves a's running statistics
  OrderedDict<Tensor> sd = a->state_dict();
  EXPECT_FALSE(sd["fc.weight"].requires_grad());
  {
    NoGradGuard no_grad;
    sd["fc.bias"].fill_(7);  // the entries alias the module's tensors
  }
  EXPECT_CLOSE(a->fc->bias, full({10}, 7.0));
  Tensor x = randn({2, 3, 4, 4});
  a->eval();
  b->eval();
  nn::IncompatibleKeys none = b->load_state_dict(sd);
  EXPECT_TRUE(none.missing_keys.empty() && none.unexpected_keys.empty());
  EXPECT_CLOSE(b(x), a(x));
  EXPECT_EQ(b->layer1[0]->named_buffers()["bn1.num_batches_tracked"].item<int64_t>(), 1);
  // Loading copies: b's tensors stay its own.
  EXPECT_FALSE(b->fc->weight.is_same(a->fc->weight));
  EXPECT_TRUE(b->fc->weight.requires_grad());
}

TEST(NnModule, LoadStateDictErrorsNameTheKeys) {
  nn::Linear lin(4, 2);
  Tensor weight_before = lin->weight.clone();
  OrderedDict<Tensor> sd;
  sd.insert("weight", ones({2, 4}));
  sd.insert("extra", ones({1}));
  // Strict: missing and unexpected keys are errors, and nothing is copied.
  EXPECT_EMBER_ERROR(lin->load_state_dict(sd), "load_state_dict: error(s) in loading state_dict for Linear",
                     "missing key(s) \"bias\"", "unexpected key(s) \"extra\"");
  EXPECT_CLOSE(lin->weight, weight_before);
  // Non-strict: they are returned, and the rest is loaded.
  nn::IncompatibleKeys keys = lin->load_state_dict(sd, /*strict=*/false);
  EXPECT_EQ(keys.missing_keys, std::vector<std::string>{"bias"});
  EXPECT_EQ(keys.unexpected_keys, std::vector<std::string>{"extra"});
  EXPECT_CLOSE(lin->weight, ones({2, 4}));
  // Shapes and dtypes must match, strict or not.
  OrderedDict<Tensor> bad;
  bad.insert("weight", ones({2, 5}));
  bad.insert("bias", ones({2}, kFloat64));
  EXPECT_EMBER_ERROR(
      lin->load_state_dict(bad, false),
      "size mismatch for weight: copying a param with shape [2, 5] from checkpoint, the shape in "
      "current model is [2, 4]",
      "dtype mismatch for bias: the checkpoint has float64, the model float32");
  OrderedDict<Tensor> undefined;
  undefined.insert("weight", Tensor());
  EXPECT_EMBER_ERROR(lin->load_state_dict(undefined, false), "\"weight\" is undefined in the state dict");
  // A nested key names its path.
  Net net;
  OrderedDict<Tensor> sd_net = net->state_dict();
  OrderedDict<Tensor> wrong;
  for (const auto& [k, v] : sd_net) wrong.insert(k, k == "layer1.1.bn2.running_var" ? ones({3}) : v);
  EXPECT_EMBER_ERROR(net->load_state_dict(wrong), "for Net", "size mismatch for layer1.1.bn2.running_var",
                     "[3]", "[8]");
}

TEST(NnModule, NonPersistentBuffersStayOutOfTheStateDict) {
  struct M : nn::Module {
    M() {
      register_buffer("kept", zeros({2}));
      register_buffer("scratch", zeros({2}), /*persistent=*/false);
    }
  };
  M m;
  EXPECT_EQ(keys_of(m.named_buffers()), (std::vector<std::string>{"kept", "scratch"}));
  EXPECT_EQ(keys_of(m.state_dict()), std::vector<std::string>{"kept"});
  m.to(kFloat64);
  EXPECT_EQ(m.named_buffers()["scratch"].dtype(), kFloat64);
}

TEST(NnModuleHolder, SharesTheModule) {
  nn::Linear a(2, 2);
  nn::Linear b = a;
  EXPECT_EQ(a.get(), b.get());
  EXPECT_TRUE(b->weight.is_same(a->weight));
  EXPECT_TRUE(a.ptr().use_count() >= 2);
  nn::Linear empty{nullptr};
  EXPECT_TRUE(empty.is_empty());
  empty = a;
  EXPECT_EQ(empty.get(), a.get());
  std::shared_ptr<nn::LinearImpl> raw = std::make_shared<nn::LinearImpl>(3, 1);
  nn::Linear wrapped(raw);
  EXPECT_EQ(wrapped.get(), raw.get());
  EXPECT_EMBER_ERROR(nn::Linear(nullptr)->forward(randn({1, 2})),
                     "ModuleHolder: accessing an empty module holder");
}

TEST(TensorSetData, KeepsIdentityAndAutogradState) {
  Tensor p = ones({2, 3}).requires_grad_();
  Tensor alias = p;
  p.set_data(full({4}, 2.0, kFloat64));
  EXPECT_TRUE(alias.is_same(p));
  EXPECT_EQ(alias.dtype(), kFloat64);
  EXPECT_TRUE(alias.sizes().equals({4}));
  EXPECT_TRUE(alias.requires_grad());
  (alias * alias).sum().backward();
  EXPECT_CLOSE(p.grad(), full({4}, 4.0, kFloat64));
  EXPECT_EMBER_ERROR(p.set_data(zeros({2}, kInt64)),
                     "set_data: a tensor that requires grad needs floating point data");
  EXPECT_EMBER_ERROR(p.set_data(Tensor()), "set_data: the new data is undefined");
}

}  // namespace
}  // namespace ember::testing
