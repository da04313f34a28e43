#include "ember/autograd/graphed_callables.h"

#include <memory>

#include "ember/autograd/engine.h"
#include "ember/core/autograd_meta.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/cuda/graph.h"

namespace ember::cuda {
namespace {

constexpr const char* kOp = "make_graphed_callables";

// The captured pair and its static tensors.
struct Graphed {
  TensorFn fn;
  std::vector<Tensor> inputs;        // the capture's arguments, refilled by each call
  std::vector<Tensor> params;
  std::vector<Tensor> outputs;       // written by each forward replay
  std::vector<size_t> diff_outputs;  // outputs with a gradient, in grad_outputs' order
  std::vector<Tensor> grad_outputs;  // refilled by each backward
  std::vector<Tensor> grad_inputs;   // per differentiated input (wrt order), written by each backward replay
  std::vector<Tensor> wrt;           // the inputs requiring grad, then the params requiring grad
  CUDAGraph forward, backward;
};

std::vector<Tensor> differentiable(const Graphed& g, const std::vector<Tensor>& outputs) {
  std::vector<Tensor> out;
  for (size_t i : g.diff_outputs) out.push_back(outputs[i]);
  return out;
}

// One backward over the capture's tensors, returning the gradients of g.wrt.
std::vector<Tensor> gradients(const Graphed& g, const std::vector<Tensor>& outputs,
                              const std::vector<Tensor>& grad_outputs) {
  if (g.wrt.empty()) return {};
  return autograd::grad(differentiable(g, outputs), g.wrt, grad_outputs, /*retain_graph=*/false,
                        /*create_graph=*/false, /*allow_unused=*/true);
}

void check_args(const Graphed& g, const std::vector<Tensor>& args) {
  EMBER_CHECK(args.size() == g.inputs.size(), kOp, ": the graphed function takes ", g.inputs.size(),
              " arguments, got ", args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const Tensor &a = args[i], &s = g.inputs[i];
    EMBER_CHECK(a.defined() && a.sizes().equals(s.sizes()) && a.dtype() == s.dtype() && a.device() == s.device() &&
                    a.requires_grad() == s.requires_grad(),
                kOp, ": argument ", i, " must match the sample (", s.dtype(), " ", s.sizes(), " on ", s.device(),
                s.requires_grad() ? ", requiring grad" : "", "), got ",
                a.defined() ? ember::detail::str_cat(a.dtype(), " ", a.sizes(), " on ", a.device(),
                                              a.requires_grad() ? ", requiring grad" : "")
                            : std::string("an undefined tensor"));
  }
}

std::vector<Tensor> call(const std::shared_ptr<Graphed>& g, const std::vector<Tensor>& args) {
  check_args(*g, args);
  std::vector<Tensor> outs;
  {
    NoGradGuard no_grad;
    for (size_t i = 0; i < args.size(); ++i) g->inputs[i].detach().copy_(args[i]);
    g->forward.replay();
    // Copies: the next replay overwrites the capture's outputs.
    for (const Tensor& o : g->outputs) outs.push_back(o.detach().clone());
  }
  std::vector<Tensor> edges = args;
  edges.insert(edges.end(), g->params.begin(), g->params.end());
  if (!needs_grad(edges) || g->diff_outputs.empty()) return outs;
  record(kOp, edges, outs, [g, n = args.size()](const GradContext& ctx) {
    NoGradGuard no_grad;
    for (size_t j = 0; j < g->diff_outputs.size(); ++j) {
      const Tensor& grad = ctx.grad(g->diff_outputs[j]);
      if (grad.defined())
        g->grad_outputs[j].copy_(grad);
      else
        g->grad_outputs[j].zero_();
    }
    g->backward.replay();
    std::vector<Tensor> grads(n + g->params.size());
    size_t k = 0;
    for (size_t i = 0; i < n + g->params.size(); ++i) {
      const Tensor& t = i < n ? g->inputs[i] : g->params[i - n];
      if (!t.requires_grad()) continue;
      const Tensor& gi = g->grad_inputs[k++];
      if (gi.defined()) grads[i] = gi.clone();  // the next replay overwrites it
    }
    return grads;
  });
  return outs;
}

}  // namespace

TensorFn make_graphed_callables(TensorFn fn, const std::vector<Tensor>& sample_args,
                                const std::vector<Tensor>& params, int warmup) {
  EMBER_CHECK(fn, kOp, ": no function given");
  auto g = std::make_shared<Graphed>();
  g->fn = std::move(fn);
  g->params = params;
  for (const Tensor& s : sample_args) {
    EMBER_CHECK(s.defined() && s.is_cuda(), kOp, ": sample arguments must be CUDA tensors, got ",
                s.defined() ? ember::detail::str_cat("one on ", s.device()) : std::string("an undefined one"));
    g->inputs.push_back(s.detach().clone().requires_grad_(s.requires_grad()));
  }
  for (const Tensor& t : g->inputs)
    if (t.requires_grad()) g->wrt.push_back(t);
  for (const Tensor& p : params)
    if (p.requires_grad()) g->wrt.push_back(p);

  // Warm-up: lazy state and plan choices happen outside the capture.
  for (int i = 0; i < warmup; ++i) {
    std::vector<Tensor> outs = g->fn(g->inputs);
    std::vector<Tensor> diff, ones;
    for (const Tensor& o : outs)
      if (o.requires_grad()) {
        diff.push_back(o);
        ones.push_back(ones_like(o));
      }
    if (!diff.empty() && !g->wrt.empty())
      autograd::grad(diff, g->wrt, ones, false, false, /*allow_unused=*/true);
  }
  {
    graph capture(g->forward);
    g->outputs = g->fn(g->inputs);
  }
  for (size_t i = 0; i < g->outputs.size(); ++i)
    if (g->outputs[i].requires_grad()) {
      g->diff_outputs.push_back(i);
      g->grad_outputs.push_back(zeros_like(g->outputs[i]));
    }
  if (!g->diff_outputs.empty()) {
    graph capture(g->backward, g->forward.pool());
    g->grad_inputs = gradients(*g, g->outputs, g->grad_outputs);
  }
  return [g](const std::vector<Tensor>& args) { return call(g, args); };
}

}  // namespace ember::cuda
