// Op ranges in the profiler (PyTorch's aten:: events): each frontend call is an `ember::<op>` range
// over its kernels, each backward node an `autograd::<op>_backward` range; the training steps of a
// transformer and of a convolutional net leave no kernel outside an op.
#include <ember/core/profiler.h>
#include <ember/nn/activation.h>
#include <ember/nn/clip_grad.h>
#include <ember/nn/container.h>
#include <ember/nn/conv.h>
#include <ember/nn/functional.h>
#include <ember/nn/linear.h>
#include <ember/nn/normalization.h>
#include <ember/nn/pooling.h>
#include <ember/nn/transformer.h>
#include <ember/optim/adam.h>
#include <ember/optim/sgd.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#if __has_include(<nlohmann/json.hpp>)
#include <nlohmann/json.hpp>
#endif

#include "profiler_test_util.h"

namespace ember::testing {
namespace {

using profiler::FunctionEventAvg;
using profiler::KeyAverages;
using profiler::Profile;

TEST(ProfilerOps, FrontendsAndBackwardNodesAreRangesOverTheirKernels) {
  Tensor x = randn({8, 16}), w = randn({16, 4}).requires_grad_(), b = zeros({4}).requires_grad_();
  Profile forward(profiler::ProfileOptions{kCpuOnly, /*record_shapes=*/true});
  Tensor loss = x.matmul(w).add(b).relu().sum();
  forward.stop();
  KeyAverages avg = forward.key_averages();
  for (const char* op : {"ember::matmul", "ember::add", "ember::relu", "ember::sum"})
    EXPECT_EQ(entry(avg, op).count, 1) << op;
  // An op's host time holds its kernel's: relu's kernel ran inside ember::relu.
  const FunctionEventAvg &relu = entry(avg, "ember::relu"), &kernel = entry(avg, "unary");
  EXPECT_GE(relu.cpu_time_total, kernel.cpu_time_total);
  EXPECT_LE(relu.self_cpu_time_total, relu.cpu_time_total - kernel.cpu_time_total + 1e-6);
  // The op's tensors, as the kernels' are recorded.
  KeyAverages shaped = forward.key_averages(/*group_by_input_shape=*/true);
  bool found = false;
  for (size_t i = 0; i < shaped.size(); ++i)
    found |= shaped[i].key == "ember::matmul" && shaped[i].input_shapes == "[8, 16] float32, [16, 4] float32";
  EXPECT_TRUE(found) << shaped.table("count", -1);

  Profile backward(kCpuOnly);
  loss.backward();
  backward.stop();
  avg = backward.key_averages();
  for (const char* node : {"autograd::sum_backward", "autograd::relu_backward", "autograd::add_backward",
                           "autograd::bmm_backward"})
    EXPECT_EQ(entry(avg, node).count, 1) << node;
  EXPECT_EQ(entry(avg, "autograd::AccumulateGrad").count, 2);  // w and b
  EXPECT_EQ(avg.find("ember::matmul"), nullptr);

  // No session, no ranges: the same code runs and nothing is left open.
  x.matmul(w).sum().backward();
}

#if __has_include(<nlohmann/json.hpp>)
// Every kernel event of a trace lies inside an op event (category cpu_op) on its thread; returns
// the names of those that do not, and the op events' names.
struct TraceCheck {
  std::set<std::string> outside, ops;
};
TraceCheck check_trace(const Profile& prof) {
  TempDir dir;
  prof.export_chrome_trace(dir.path() + "/trace.json");
  std::ifstream in(dir.path() + "/trace.json");
  const nlohmann::json events = nlohmann::json::parse(in).at("traceEvents");
  struct Span {
    int64_t tid;
    double begin, end;
  };
  std::vector<Span> ops;
  TraceCheck out;
  for (const auto& e : events) {
    if (e.at("cat") != "cpu_op") continue;
    const double ts = e.at("ts");
    ops.push_back({e.at("tid").get<int64_t>(), ts, ts + e.at("dur").get<double>()});
    out.ops.insert(e.at("name").get<std::string>());
  }
  for (const auto& e : events) {
    if (e.at("cat") != "kernel") continue;
    const double ts = e.at("ts"), end = ts + e.at("dur").get<double>();
    const int64_t tid = e.at("tid");
    bool inside = false;
    for (const Span& s : ops) inside |= s.tid == tid && ts >= s.begin && end <= s.end + 1e-3;
    if (!inside) out.outside.insert(e.at("name").get<std::string>());
  }
  return out;
}

std::string joined(const std::set<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += n + " ";
  return s;
}

// A BERT-style step: embedding-free encoder layers, a classifier, cross-entropy, clipping, AdamW.
TEST(ProfilerOps, ATransformerStepHasNoKernelOutsideAnOp) {
  manual_seed(0);
  nn::TransformerEncoderLayer layer(nn::TransformerEncoderLayerOptions(32, 4).dim_feedforward(64));
  nn::Linear head(32, 10);
  std::vector<Tensor> params = layer->parameters();
  for (const Tensor& p : head->parameters()) params.push_back(p);
  optim::AdamW opt(params, optim::AdamWOptions(1e-3));
  Tensor x = randn({4, 6, 32}), y = randint(0, 10, {24});
  Profile prof(kCpuOnly);
  opt.zero_grad();
  Tensor loss = cross_entropy(head(layer(x)).reshape({24, 10}), y);
  loss.backward();
  nn::utils::clip_grad_norm_(params, 1.0);
  opt.step();
  prof.stop();
  const TraceCheck check = check_trace(prof);
  EXPECT_TRUE(check.outside.empty()) << "kernels outside any op: " << joined(check.outside);
  for (const char* op :
       {"ember::linear", "ember::scaled_dot_product_attention", "ember::dropout_add_layer_norm",
        "ember::cross_entropy", "autograd::dropout_add_layer_norm_backward", "ember::norm"})
    EXPECT_TRUE(check.ops.count(op)) << op << " missing from " << joined(check.ops);
}

// A ResNet-style step: convolution, batch norm, ReLU, pooling, a linear head, SGD with momentum.
TEST(ProfilerOps, AConvolutionalStepHasNoKernelOutsideAnOp) {
  manual_seed(0);
  nn::Sequential net(nn::Conv2d(nn::Conv2dOptions(3, 8, 3).padding(1)), nn::BatchNorm2d(8), nn::ReLU(),
                     nn::MaxPool2d(2), nn::AdaptiveAvgPool2d(1), nn::Flatten(), nn::Linear(8, 5));
  optim::SGD opt(net->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  Tensor x = randn({4, 3, 8, 8}), y = randint(0, 5, {4});
  Profile prof(kCpuOnly);
  opt.zero_grad();
  cross_entropy(net->forward(x), y).backward();
  opt.step();
  prof.stop();
  const TraceCheck check = check_trace(prof);
  EXPECT_TRUE(check.outside.empty()) << "kernels outside any op: " << joined(check.outside);
  for (const char* op :
       {"ember::conv2d", "ember::batch_norm", "ember::max_pool2d", "autograd::conv2d_backward"})
    EXPECT_TRUE(check.ops.count(op)) << op << " missing from " << joined(check.ops);
}
#endif

}  // namespace
}  // namespace ember::testing
