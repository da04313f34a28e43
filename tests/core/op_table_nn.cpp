// Op-table entries for the nn families: softmax, normalization, dropout, embedding, losses and
// attention. Options an op takes beyond its tensors (dim, reduction, ...) travel as a trailing
// 0-dim int64 "config" input, which the reference run leaves as is.
#include "ember/core/ops/attention.h"
#include "ember/core/ops/dropout.h"
#include "ember/core/ops/dropout_add_layer_norm.h"
#include "ember/core/ops/embedding.h"
#include "ember/core/ops/loss.h"
#include "ember/core/ops/normalization.h"
#include "ember/core/ops/softmax.h"
#include "test_util.h"

namespace ember::testing {
namespace {

using Inputs = std::vector<Tensor>;

Tensor config(int64_t v) { return full({}, v, kInt64); }
int64_t config_of(const Inputs& in) { return in.back().item<int64_t>(); }

Tensor rnd(ScalarType dt, IntArrayRef shape, double low = -2, double high = 2) {
  return random_tensor(shape, dt, low, high);
}

Sample sample(Inputs in, const std::string& desc) { return {std::move(in), desc}; }

// The same call with every input made non-contiguous.
Sample non_contiguous_of(Sample s) {
  for (Tensor& t : s.inputs) t = non_contiguous(t);
  s.desc += " (non-contiguous)";
  return s;
}

const char* reduction_of(int64_t cfg) {
  static const char* names[] = {"none", "mean", "sum"};
  return names[cfg % 3];
}

// --- softmax, log_softmax: the config is the dim. ---
std::vector<Sample> softmax_samples(ScalarType dt) {
  std::vector<Sample> s = {
      sample({rnd(dt, {4, 5}), config(-1)}, "[4, 5] dim -1"),
      sample({rnd(dt, {2, 3, 4}), config(1)}, "[2, 3, 4] dim 1"),
      sample({rnd(dt, {3, 4}), config(0)}, "[3, 4] dim 0"),
      sample({rnd(dt, {2, 3, 300}), config(1)}, "[2, 3, 300] dim 1 (two column blocks)"),
      sample({rnd(dt, {3, 7}, -60, 60), config(1)}, "[3, 7] large logits"),
      sample({rnd(dt, {}), config(0)}, "[] dim 0"),
      sample({rnd(dt, {3, 0}), config(1)}, "[3, 0] dim 1"),
      sample({rnd(dt, {0, 4}), config(0)}, "[0, 4] dim 0"),
  };
  s.push_back(non_contiguous_of(s[0]));
  s.push_back(non_contiguous_of(s[1]));
  return s;
}

// The backward ops: a gradient, the forward's output (computed in float64 from softmax's samples,
// then rounded: both runs see the same values) and the dim.
std::vector<Sample> softmax_backward_samples(ScalarType dt, bool log) {
  std::vector<Sample> s = softmax_samples(kFloat64);
  for (Sample& c : s) {
    int64_t dim = config_of(c.inputs);
    Tensor x = c.inputs[0];
    Tensor y = log ? log_softmax(x, dim) : softmax(x, dim);
    c.inputs = {rnd(dt, x.sizes()), y.to(dt), c.inputs.back()};
  }
  s.push_back(non_contiguous_of(s[0]));
  s.push_back(non_contiguous_of(s[1]));
  return s;
}

// --- norms ---// --- norms ---
std::vector<Sample> layer_norm_samples(ScalarType dt) {
  std::vector<Sample> s = {
      sample({rnd(dt, {4, 6}), rnd(dt, {6}), rnd(dt, {6}), config(0)}, "[4, 6] affine"),
      sample({rnd(dt, {2, 3, 4}), rnd(dt, {3, 4}), rnd(dt, {3, 4}), config(0)}, "[2, 3, 4] over [3, 4]"),
      sample({rnd(dt, {3, 5}, 90, 110), rnd(dt, {5}), rnd(dt, {5}), config(1)},
             "[3, 5] mean >> std, no affine"),
      sample({rnd(dt, {0, 5}), rnd(dt, {5}), rnd(dt, {5}), config(0)}, "[0, 5]"),
  };
  s.push_back(non_contiguous_of(s[1]));
  return s;
}

// dropout_add_layer_norm: x, residual (x's dtype, or float32), weight [N], bias [N] and a config
// of kNoAffine and kEval bits. Rows of 5, 7, 9 and 13 start inside the mask's 4-element blocks.
constexpr int64_t kNoAffine = 1, kEval = 2;
std::vector<Sample> dropout_add_layer_norm_samples(ScalarType dt) {
  auto make = [&](DimVector shape, int64_t cfg, const std::string& desc, ScalarType rdt, double low = -2,
                  double high = 2) {
    int64_t N = shape.back();
    return sample(
        {rnd(dt, shape, low, high), rnd(rdt, shape, low, high), rnd(dt, {N}), rnd(dt, {N}), config(cfg)},
        desc);
  };
  std::vector<Sample> s = {
      make({4, 6}, 0, "[4, 6]", dt),
      make({2, 3, 13}, 0, "[2, 3, 13]", dt),
      make({3, 5}, kNoAffine, "[3, 5] no affine", dt),
      make({3, 5}, kEval, "[3, 5] eval", dt),
      make({3, 7}, 0, "[3, 7] mean >> std", dt, 90, 110),
      make({5, 9}, 0, "[5, 9] float32 residual", kFloat32),
      make({7}, 0, "[7] one row", dt),
      make({0, 5}, 0, "[0, 5]", dt),
  };
  s.push_back(non_contiguous_of(s[1]));
  return s;
}

// Config 0: training (output plus an eval pass with the updated running stats), 1: eval.
// Training keeps float32 running stats for f16/bf16 inputs, as mixed precision does: stats
// updated in bf16 would round off more than the tolerance.
std::vector<Sample> batch_norm_samples(ScalarType dt) {
  auto make = [&](DimVector shape, int64_t cfg) {
    int64_t C = shape[1];
    ScalarType st = cfg == 0 && is_reduced_float(dt) ? kFloat32 : dt;
    return sample(
        {rnd(dt, shape), rnd(dt, {C}), rnd(dt, {C}), rnd(st, {C}), rnd(st, {C}, 0.5, 2), config(cfg)},
        std::string(cfg ? "eval " : "training ") + ::testing::PrintToString(shape.size()) + "-d");
  };
  std::vector<Sample> s = {make({8, 3}, 0), make({4, 3, 5}, 0), make({2, 3, 4, 5}, 0), make({4, 3, 5}, 1),
                           make({0, 3, 2}, 1)};
  s.push_back(non_contiguous_of(s[1]));
  // Channels-last (NHWC memory), which batch_norm reads and writes without a copy.
  for (int64_t cfg : {0, 1}) {
    Sample cl = make({2, 8, 3, 5}, cfg);
    cl.inputs[0] = cl.inputs[0].permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
    cl.desc += " (channels-last)";
    s.push_back(cl);
  }
  return s;
}

// batch_norm's samples with a residual of x's shape and layout before the config.
std::vector<Sample> batch_norm_relu_samples(ScalarType dt) {
  std::vector<Sample> s = batch_norm_samples(dt);
  for (Sample& c : s)
    c.inputs.insert(c.inputs.end() - 1, empty_like(c.inputs[0]).copy_(rnd(dt, c.inputs[0].sizes())));
  return s;
}

// Config: num_groups.
std::vector<Sample> group_norm_samples(ScalarType dt) {
  auto make = [&](DimVector shape, int64_t groups) {
    int64_t C = shape[1];
    return sample({rnd(dt, shape), rnd(dt, {C}), rnd(dt, {C}), config(groups)},
                  ::testing::PrintToString(shape.size()) + "-d, groups " + std::to_string(groups));
  };
  std::vector<Sample> s = {make({2, 6, 5}, 3), make({3, 4}, 2), make({2, 4, 3, 3}, 4), make({2, 4, 3, 3}, 1),
                           make({0, 4, 3}, 2)};
  s.push_back(non_contiguous_of(s[0]));
  return s;
}

// --- native_dropout_backward: a gradient and a bool mask of its shape. ---
std::vector<Sample> dropout_backward_samples(ScalarType dt) {
  std::vector<Sample> s;
  Generator gen(3);
  for (const auto& shapes : unary_shapes()) {
    const DimVector& shape = shapes[0];
    s.push_back(sample({rnd(dt, shape), bernoulli(empty(shape, kBool), 0.6, &gen)},
                       detail::str_cat(IntArrayRef(shape))));
  }
  s.push_back(non_contiguous_of(s[0]));
  return s;
}

// --- embedding ---
std::vector<Sample> embedding_samples(ScalarType dt) {
  std::vector<Sample> s = {
      sample({rnd(dt, {10, 4}), randint(0, 10, {3, 5})}, "int64 [3, 5]"),
      sample({rnd(dt, {5, 3}), randint(0, 5, {7}, kInt32)}, "int32 [7]"),
      sample({rnd(dt, {6, 2}), full({}, 5, kInt64)}, "0-dim index"),
      sample({rnd(dt, {4, 3}), empty({0}, kInt64)}, "no indices"),
  };
  s.push_back(non_contiguous_of(s[0]));
  return s;
}

// --- losses. Config bits for the class losses: reduction (cfg % 3), class weight (cfg / 3 % 2),
// label smoothing 0.2 (cfg / 6 % 2), ignore_index = 1 (cfg / 12 % 2). ---
constexpr int64_t kWeight = 3, kSmooth = 6, kIgnore = 12;

Tensor class_loss(const Inputs& in, bool log_probs_given) {
  int64_t cfg = config_of(in);
  Tensor w = cfg / kWeight % 2 ? in[2] : Tensor();
  int64_t ignore = cfg / kIgnore % 2 ? 1 : -100;
  if (log_probs_given) return nll_loss(in[0], in[1], w, ignore, reduction_of(cfg));
  return cross_entropy(in[0], in[1], w, ignore, reduction_of(cfg), cfg / kSmooth % 2 ? 0.2 : 0.0);
}

std::vector<Sample> class_loss_samples(ScalarType dt, bool log_probs_given, bool with_probs) {
  double lo = log_probs_given ? -4 : -3, hi = log_probs_given ? 0 : 3;
  auto make = [&](DimVector x_shape, int64_t cfg, bool probs) {
    int64_t C = x_shape.size() == 1 ? x_shape[0] : x_shape[1];
    DimVector t_shape = x_shape;
    if (!probs) t_shape.erase(x_shape.size() == 1 ? 0 : 1);
    Tensor target = probs ? rnd(dt, x_shape, 0, 1) : randint(0, std::max<int64_t>(C, 1), t_shape);
    return sample({rnd(dt, x_shape, lo, hi), target, rnd(dt, {C}, 0.5, 2), config(cfg)},
                  std::string(probs ? "probabilities" : "indices") + " cfg " + std::to_string(cfg));
  };
  std::vector<Sample> s = {
      make({4, 5}, 1, false),
      make({4, 5}, 0, false),
      make({4, 5}, 2 + kIgnore, false),
      make({4, 5}, 1 + kWeight, false),
      make({6, 5}, 1 + kWeight + kIgnore, false),
      make({2, 3, 4}, 0 + kWeight + kIgnore, false),
      make({2, 3, 2, 2}, 1, false),
      make({3}, 1 + kWeight, false),
      make({0, 4}, 2, false),
      make({0, 4}, 1, false),
  };
  if (!log_probs_given) {
    for (int64_t cfg :
         {1 + kSmooth, kSmooth + kWeight, 1 + kSmooth + kWeight + kIgnore, 2 + kSmooth + kIgnore})
      s.push_back(make({5, 4}, cfg, false));
    s.push_back(make({2, 3, 4}, 1 + kSmooth + kWeight, false));
  }
  if (with_probs) {
    for (int64_t cfg : {int64_t{1}, kWeight, 2 + kSmooth, 1 + kSmooth + kWeight})
      s.push_back(make({4, 5}, cfg, true));
    s.push_back(make({2, 3, 4}, 1 + kWeight, true));
    s.push_back(make({3}, 0, true));
  }
  s.push_back(non_contiguous_of(s[4]));
  return s;
}

std::vector<Sample> mse_samples(ScalarType dt) {
  std::vector<Sample> s;
  std::vector<std::vector<DimVector>> shapes = binary_shapes();
  for (size_t i = 0; i < shapes.size(); ++i)
    s.push_back(sample({rnd(dt, shapes[i][0]), rnd(dt, shapes[i][1]), config(static_cast<int64_t>(i))},
                       "shapes #" + std::to_string(i) + " " + reduction_of(static_cast<int64_t>(i))));
  s.push_back(non_contiguous_of(s[1]));
  return s;
}

// Config: reduction (cfg % 3), weight (cfg / 3 % 2), pos_weight (cfg / 6 % 2).
constexpr int64_t kPosWeight = 6;
std::vector<Sample> bce_samples(ScalarType dt) {
  auto make = [&](DimVector shape, DimVector w_shape, DimVector pw_shape, int64_t cfg, double range) {
    return sample({rnd(dt, shape, -range, range), rnd(dt, shape, 0, 1), rnd(dt, w_shape, 0.5, 2),
                   rnd(dt, pw_shape, 0.5, 3), config(cfg)},
                  "cfg " + std::to_string(cfg));
  };
  std::vector<Sample> s = {
      make({4, 5}, {4, 5}, {5}, 1, 3),
      make({4, 5}, {4, 5}, {5}, kWeight + kPosWeight, 3),
      make({4, 5}, {5}, {5}, 2 + kPosWeight, 3),
      make({4, 5}, {}, {4, 1}, 1 + kWeight + kPosWeight, 30),
      make({3}, {3}, {3}, 0, 3),
      make({0, 5}, {5}, {5}, 1 + kWeight + kPosWeight, 3),
  };
  s.push_back(non_contiguous_of(s[1]));
  return s;
}

// --- attention. Config: 0 no mask, 1 bool mask, 2 float mask, 3 causal, 4 scale 0.3. ---
std::vector<Sample> sdpa_samples(ScalarType dt) {
  auto make = [&](DimVector q, DimVector k, DimVector v, DimVector m, int64_t cfg) {
    Tensor mask = cfg == 1 ? random_tensor(m, kBool) : rnd(dt, m);
    return sample({rnd(dt, q), rnd(dt, k), rnd(dt, v), mask, config(cfg)}, "cfg " + std::to_string(cfg));
  };
  std::vector<Sample> s = {
      make({2, 3, 4, 5}, {2, 3, 6, 5}, {2, 3, 6, 7}, {}, 0),
      make({2, 3, 4, 5}, {2, 3, 6, 5}, {2, 3, 6, 7}, {4, 6}, 1),
      make({2, 3, 4, 5}, {2, 3, 6, 5}, {2, 3, 6, 7}, {2, 1, 4, 6}, 2),
      make({2, 5, 4}, {2, 5, 4}, {2, 5, 3}, {}, 3),
      make({2, 3, 4, 5}, {3, 6, 5}, {1, 6, 5}, {}, 0),
      make({4, 8}, {6, 8}, {6, 2}, {}, 4),
      make({1, 70, 4}, {1, 20, 4}, {1, 20, 4}, {}, 3),
      make({0, 4, 5}, {0, 6, 5}, {0, 6, 5}, {}, 0),
      make({2, 3, 4}, {2, 0, 4}, {2, 0, 3}, {}, 0),
  };
  s.push_back(non_contiguous_of(s[1]));
  s.push_back(non_contiguous_of(s[2]));
  return s;
}

Tensor sdpa(const Inputs& in) {
  int64_t cfg = config_of(in);
  Tensor mask = cfg == 1 || cfg == 2 ? in[3] : Tensor();
  std::optional<double> scale;
  if (cfg == 4) scale = 0.3;
  return scaled_dot_product_attention(in[0], in[1], in[2], mask, 0.0, cfg == 3, scale);
}

const OpTableRegistrar registrar({
    {"softmax", softmax_samples, [](const Inputs& in) { return softmax(in[0], config_of(in)); }},
    {"log_softmax", softmax_samples, [](const Inputs& in) { return log_softmax(in[0], config_of(in)); }},
    {"_softmax_backward_data", [](ScalarType dt) { return softmax_backward_samples(dt, false); },
     [](const Inputs& in) { return _softmax_backward_data(in[0], in[1], config_of(in), in[1].dtype()); }},
    {"_log_softmax_backward_data", [](ScalarType dt) { return softmax_backward_samples(dt, true); },
     [](const Inputs& in) { return _log_softmax_backward_data(in[0], in[1], config_of(in), in[1].dtype()); }},
    {"layer_norm", layer_norm_samples,
     [](const Inputs& in) {
       bool affine = config_of(in) == 0;
       return layer_norm(in[0], in[1].sizes(), affine ? in[1] : Tensor(), affine ? in[2] : Tensor());
     }},
    {"batch_norm", batch_norm_samples,
     [](const Inputs& in) {
       Tensor rm = in[3].clone(), rv = in[4].clone();
       if (config_of(in) == 1) return batch_norm(in[0], rm, rv, in[1], in[2], false);
       // Both outputs, stacked: the training one, then eval with the updated running stats.
       DimVector shape(in[0].sizes().begin(), in[0].sizes().end());
       shape.insert(0, 2);
       Tensor both = empty(shape, in[0].options());
       both[0].copy_(batch_norm(in[0], rm, rv, in[1], in[2], true, 0.3));
       both[1].copy_(batch_norm(in[0], rm, rv, in[1], in[2], false));
       return both;
     }},
    {"batch_norm_relu", batch_norm_relu_samples,
     [](const Inputs& in) {
       Tensor rm = in[3].clone(), rv = in[4].clone();
       bool training = config_of(in) == 0;
       // The output, then (training) the updated running statistics.
       Tensor out = batch_norm_relu(in[0], rm, rv, in[1], in[2], training, 0.3, 1e-5, in[5]);
       return training ? cat({out.flatten(), rm.to(out.dtype()), rv.to(out.dtype())}) : out;
     }},
    {"group_norm", group_norm_samples,
     [](const Inputs& in) { return group_norm(in[0], config_of(in), in[1], in[2]); }},
    {"dropout", [](ScalarType dt) { return samples_from_shapes(dt, unary_shapes()); },
     [](const Inputs& in) {
       // A fresh generator per call: the f64 reference draws the same mask.
       Generator gen(7);
       return dropout(in[0], 0.3, true, &gen);
     }},
    {"native_dropout", [](ScalarType dt) { return samples_from_shapes(dt, unary_shapes()); },
     [](const Inputs& in) {
       Generator gen(7);
       auto [out, mask] = native_dropout(in[0], 0.3, true, &gen);
       return stack({out, mask.to(out.dtype())});
     }},
    {"gelu_dropout", [](ScalarType dt) { return samples_from_shapes(dt, unary_shapes()); },
     [](const Inputs& in) {
       Generator gen(7);
       return gelu_dropout(in[0], 0.3, true, &gen);
     }},
    {"dropout_add_layer_norm", dropout_add_layer_norm_samples,
     [](const Inputs& in) {
       const int64_t cfg = config_of(in);
       const bool affine = !(cfg & kNoAffine);
       Generator gen(7);
       return dropout_add_layer_norm(in[0], in[1], affine ? in[2] : Tensor(), affine ? in[3] : Tensor(), 0.3,
                                     1e-5, !(cfg & kEval), &gen);
     }},
    {"native_dropout_backward", dropout_backward_samples,
     [](const Inputs& in) { return native_dropout_backward(in[0], in[1], 1 / 0.7); }},
    {"embedding", embedding_samples, [](const Inputs& in) { return embedding(in[0], in[1]); }},
    {"cross_entropy", [](ScalarType dt) { return class_loss_samples(dt, false, true); },
     [](const Inputs& in) { return class_loss(in, false); }},
    {"nll_loss", [](ScalarType dt) { return class_loss_samples(dt, true, false); },
     [](const Inputs& in) { return class_loss(in, true); }},
    {"mse_loss", mse_samples,
     [](const Inputs& in) { return mse_loss(in[0], in[1], reduction_of(config_of(in))); }},
    {"binary_cross_entropy_with_logits", bce_samples,
     [](const Inputs& in) {
       int64_t cfg = config_of(in);
       return binary_cross_entropy_with_logits(in[0], in[1], cfg / kWeight % 2 ? in[2] : Tensor(),
                                               reduction_of(cfg), cfg / kPosWeight % 2 ? in[3] : Tensor());
     }},
    {"scaled_dot_product_attention", sdpa_samples, sdpa},
});

}  // namespace
}  // namespace ember::testing
