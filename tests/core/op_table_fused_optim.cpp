// Op-table entries of the fused optimizer steps. A sample holds the tensors of one or more
// parameters (Adam: param, grad, exp_avg, exp_avg_sq[, max_exp_avg_sq]; SGD: param, grad,
// momentum_buffer) and a trailing 0-dim int64 config of option bits. fn runs one step on
// contiguous copies (the step counts start at 3) and returns the updated params and state,
// flattened and concatenated; the CUDA suite compares the same with the CPU.
#include "ember/core/ops/fused_optim.h"
#include "test_util.h"

namespace ember::testing {
namespace {

using Inputs = std::vector<Tensor>;

enum AdamBits : int64_t {
  kAmsgrad = 1,
  kAdamMaximize = 2,
  kDecoupled = 4,
  kAdamDecay = 8,
  kAdamScale = 16,
  kLowBeta1 = 32
};
enum SgdBits : int64_t {
  kMomentum = 1,
  kNesterov = 2,
  kSgdMaximize = 4,
  kSgdDecay = 8,
  kFirstStep = 16,
  kSgdScale = 32
};

Tensor config(int64_t v) { return full({}, v, kInt64); }

// The shapes of each call's parameters: one, several, a zero-size one, a 0-dim one.
const std::vector<std::vector<DimVector>> kParamShapes = {
    {{4, 5}}, {{3}, {2, 3}, {7}}, {{0, 4}, {6}}, {DimVector{}}};

// Per parameter: the params and gradients in [-2, 2), first moments in [-1, 1), second moments
// (and their maxima) in [0.5, 2) so the step stays well conditioned in float16.
std::vector<Sample> samples(ScalarType dt, const std::vector<int64_t>& configs,
                            int64_t (*states_of)(int64_t cfg)) {
  std::vector<Sample> out;
  for (int64_t cfg : configs) {
    const int64_t states = states_of(cfg);
    for (const std::vector<DimVector>& shapes : kParamShapes) {
      Sample s;
      for (const DimVector& shape : shapes) {
        s.inputs.push_back(random_tensor(shape, dt));
        s.inputs.push_back(random_tensor(shape, dt));
        for (int64_t k = 0; k < states; ++k)
          s.inputs.push_back(k == 0 ? random_tensor(shape, dt, -1, 1) : random_tensor(shape, dt, 0.5, 2));
      }
      s.inputs.push_back(config(cfg));
      s.desc = std::to_string(shapes.size()) + " params, config " + std::to_string(cfg);
      out.push_back(s);
    }
  }
  return out;
}

// Copies of every `per`-th input starting at `first`, made contiguous.
std::vector<Tensor> column(const Inputs& in, size_t per, size_t first) {
  std::vector<Tensor> out;
  for (size_t i = first; i + 1 < in.size(); i += per) out.push_back(in[i].contiguous().clone());
  return out;
}

Tensor flat_cat(std::initializer_list<std::vector<Tensor>> lists) {
  std::vector<Tensor> flat;
  for (const std::vector<Tensor>& l : lists)
    for (const Tensor& t : l) flat.push_back(t.reshape({-1}));
  return cat(flat);
}

Tensor scale_or_none(bool on, const Tensor& like) {
  return on ? full({}, 2.0, TensorOptions(kFloat32).device(like.device())) : Tensor();
}

Tensor adam_fn(const Inputs& in) {
  const int64_t cfg = in.back().item<int64_t>();
  const size_t per = cfg & kAmsgrad ? 5 : 4;
  std::vector<Tensor> p = column(in, per, 0), g = column(in, per, 1), m = column(in, per, 2),
                      v = column(in, per, 3),
                      vmax = cfg & kAmsgrad ? column(in, per, 4) : std::vector<Tensor>();
  std::vector<Tensor> steps;
  for (const Tensor& t : p) steps.push_back(full({}, 3.0, TensorOptions(kFloat32).device(t.device())));
  FusedAdamArgs a{.lr = 0.01,
                  .beta1 = cfg & kLowBeta1 ? 0.3 : 0.9,
                  .beta2 = 0.99,
                  .weight_decay = cfg & kAdamDecay ? 0.1 : 0.0,
                  .eps = 1e-8,
                  .amsgrad = (cfg & kAmsgrad) != 0,
                  .maximize = (cfg & kAdamMaximize) != 0,
                  .decoupled_weight_decay = (cfg & kDecoupled) != 0};
  fused_adam_(p, g, m, v, vmax, steps, a, scale_or_none(cfg & kAdamScale, p[0]));
  return flat_cat({p, g, m, v, vmax});
}

Tensor sgd_fn(const Inputs& in) {
  const int64_t cfg = in.back().item<int64_t>();
  const bool momentum = cfg & kMomentum;
  std::vector<Tensor> p = column(in, 3, 0), g = column(in, 3, 1),
                      buf = momentum ? column(in, 3, 2) : Inputs();
  FusedSgdArgs a{.lr = 0.1,
                 .momentum = momentum ? 0.9 : 0.0,
                 .dampening = momentum && !(cfg & kNesterov) ? 0.1 : 0.0,
                 .weight_decay = cfg & kSgdDecay ? 0.05 : 0.0,
                 .nesterov = (cfg & kNesterov) != 0,
                 .maximize = (cfg & kSgdMaximize) != 0,
                 .is_first_step = (cfg & kFirstStep) != 0};
  fused_sgd_(p, g, buf, a, scale_or_none(cfg & kSgdScale, p[0]));
  return flat_cat({p, g, buf});
}

const OpTableRegistrar registrar({
    {"fused_adam_",
     [](ScalarType dt) {
       return samples(dt,
                      {0, kAdamDecay | kAdamMaximize, kDecoupled | kAdamDecay | kLowBeta1, kAdamScale,
                       kAmsgrad, kAmsgrad | kDecoupled | kAdamDecay},
                      [](int64_t cfg) -> int64_t { return cfg & kAmsgrad ? 3 : 2; });
     },
     adam_fn},
    {"fused_sgd_",
     [](ScalarType dt) {
       return samples(dt,
                      {0, kSgdDecay | kSgdMaximize | kSgdScale, kMomentum, kMomentum | kFirstStep | kSgdDecay,
                       kMomentum | kNesterov | kSgdDecay},
                      [](int64_t) -> int64_t { return 1; });
     },
     sgd_fn},
});

}  // namespace
}  // namespace ember::testing
