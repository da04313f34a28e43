#include "ember/nn/rnn.h"

#include <cmath>

#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/ops/shape_ops.h"
#include "ember/core/random.h"
#include "ember/nn/functional.h"

namespace ember::nn {
namespace {

// PyTorch's LSTM cell: gates i|f|g|o, c' = f c + i g, h' = o tanh(c').
std::vector<Tensor> lstm_cell(const Tensor& x_gates, const std::vector<Tensor>& state, const Tensor& w_hh,
                              const Tensor& b_hh) {
  const std::vector<Tensor> g = (x_gates + functional::linear(state[0], w_hh, b_hh)).chunk(4, 1);
  const Tensor c = g[1].sigmoid() * state[1] + g[0].sigmoid() * g[2].tanh();
  return {g[3].sigmoid() * c.tanh(), c};
}

// PyTorch's GRU cell: gates r|z|n, n = tanh(x_n + r (W_hn h + b_hn)), h' = (1 - z) n + z h.
std::vector<Tensor> gru_cell(const Tensor& x_gates, const std::vector<Tensor>& state, const Tensor& w_hh,
                             const Tensor& b_hh) {
  const std::vector<Tensor> x = x_gates.chunk(3, 1), h = functional::linear(state[0], w_hh, b_hh).chunk(3, 1);
  const Tensor r = (x[0] + h[0]).sigmoid(), z = (x[1] + h[1]).sigmoid();
  const Tensor n = (x[2] + r * h[2]).tanh();
  return {(1 - z) * n + z * state[0]};
}

}  // namespace

RNNBase::RNNBase(std::string name, const RNNOptions& options_, int64_t gates)
    : Module(std::move(name)), options(options_), gates_(gates) {
  const std::string who = this->name();
  EMBER_CHECK(options.input_size() > 0 && options.hidden_size() > 0 && options.num_layers() > 0, who,
              ": input_size, hidden_size and num_layers must be positive, got ", options.input_size(), ", ",
              options.hidden_size(), " and ", options.num_layers());
  EMBER_CHECK(options.dropout() >= 0 && options.dropout() <= 1, who,
              ": dropout must be a probability between 0 and 1, got ", options.dropout());
  const int64_t H = options.hidden_size(), dirs = options.bidirectional() ? 2 : 1;
  for (int64_t layer = 0; layer < options.num_layers(); ++layer)
    for (int64_t d = 0; d < dirs; ++d) {
      const int64_t in = layer == 0 ? options.input_size() : H * dirs;
      const std::string suffix = "_l" + std::to_string(layer) + (d == 1 ? "_reverse" : "");
      std::vector<Tensor> w = {register_parameter("weight_ih" + suffix, empty({gates * H, in})),
                               register_parameter("weight_hh" + suffix, empty({gates * H, H}))};
      if (options.bias()) {
        w.push_back(register_parameter("bias_ih" + suffix, empty({gates * H})));
        w.push_back(register_parameter("bias_hh" + suffix, empty({gates * H})));
      }
      all_weights.push_back(std::move(w));
    }
  reset_parameters();
}

void RNNBase::reset_parameters() {
  NoGradGuard no_grad;
  const double bound = 1 / std::sqrt(static_cast<double>(options.hidden_size()));
  for (const Tensor& p : parameters()) uniform_(p, -bound, bound);
}

std::string RNNBase::extra_repr() const {
  return ember::detail::str_cat(
      options.input_size(), ", ", options.hidden_size(),
      options.num_layers() != 1 ? ", num_layers=" + std::to_string(options.num_layers()) : "",
      options.batch_first() ? ", batch_first=True" : "",
      options.bidirectional() ? ", bidirectional=True" : "");
}

std::pair<Tensor, std::vector<Tensor>> RNNBase::run(const Tensor& input, std::vector<Tensor> state, Cell cell,
                                                    const char* op) const {
  EMBER_CHECK(input.defined() && input.dim() == 3, op, ": expected a 3D input [",
              options.batch_first() ? "batch, seq, features" : "seq, batch, features", "], got ",
              input.defined() ? input.sizes() : IntArrayRef{});
  EMBER_CHECK(input.size(2) == options.input_size(), op, ": expected ", options.input_size(),
              " input features, got ", input.size(2), " (input ", input.sizes(), ")");
  EMBER_CHECK(input.dtype() == all_weights[0][0].dtype() && input.device() == all_weights[0][0].device(), op,
              ": the input is ", input.dtype(), " on ", input.device(), ", the parameters ",
              all_weights[0][0].dtype(), " on ", all_weights[0][0].device());
  const Tensor x0 = options.batch_first() ? input.transpose(0, 1) : input;
  const int64_t T = x0.size(0), B = x0.size(1), H = options.hidden_size();
  const int64_t dirs = options.bidirectional() ? 2 : 1, L = options.num_layers();
  for (Tensor& s : state) {
    if (!s.defined()) s = zeros({L * dirs, B, H}, input.options());
    EMBER_CHECK(s.sizes().equals({L * dirs, B, H}), op, ": expected a hidden state of shape [", L * dirs,
                ", ", B, ", ", H, "], got ", s.sizes());
  }
  std::vector<std::vector<Tensor>> finals(state.size());
  Tensor x = x0;
  for (int64_t layer = 0; layer < L; ++layer) {
    std::vector<Tensor> outputs;
    for (int64_t d = 0; d < dirs; ++d) {
      const std::vector<Tensor>& w = all_weights[static_cast<size_t>(layer * dirs + d)];
      const Tensor b_ih = options.bias() ? w[2] : Tensor(), b_hh = options.bias() ? w[3] : Tensor();
      // The whole sequence's input projection in one product.
      const Tensor x_gates = functional::linear(x, w[0], b_ih);
      std::vector<Tensor> s;
      for (const Tensor& full : state) s.push_back(full[layer * dirs + d]);
      std::vector<Tensor> steps(static_cast<size_t>(T));
      for (int64_t k = 0; k < T; ++k) {
        const int64_t t = d == 0 ? k : T - 1 - k;
        s = cell(x_gates[t], s, w[1], b_hh);
        steps[static_cast<size_t>(t)] = s[0];
      }
      for (size_t i = 0; i < s.size(); ++i) finals[i].push_back(s[i]);
      outputs.push_back(T > 0 ? stack(steps, 0) : empty({0, B, H}, input.options()));
    }
    x = dirs == 1 ? outputs[0] : cat(outputs, 2);
    if (layer + 1 < L && options.dropout() > 0) x = functional::dropout(x, options.dropout(), is_training());
  }
  std::vector<Tensor> out_states;
  for (const std::vector<Tensor>& f : finals) out_states.push_back(stack(f, 0));
  return {options.batch_first() ? x.transpose(0, 1) : x, out_states};
}

LSTMImpl::LSTMImpl(const LSTMOptions& options) : RNNBase("LSTM", options, 4) {}

std::tuple<Tensor, std::tuple<Tensor, Tensor>> LSTMImpl::forward(
    const Tensor& input, const std::optional<std::tuple<Tensor, Tensor>>& hx) {
  std::vector<Tensor> state =
      hx ? std::vector<Tensor>{std::get<0>(*hx), std::get<1>(*hx)} : std::vector<Tensor>{Tensor(), Tensor()};
  auto [out, finals] = run(input, std::move(state), &lstm_cell, "LSTM");
  return {out, {finals[0], finals[1]}};
}

GRUImpl::GRUImpl(const GRUOptions& options) : RNNBase("GRU", options, 3) {}

std::tuple<Tensor, Tensor> GRUImpl::forward(const Tensor& input, const Tensor& hx) {
  auto [out, finals] = run(input, {hx}, &gru_cell, "GRU");
  return {out, finals[0]};
}

}  // namespace ember::nn
