#pragma once

// nn.LSTM and nn.GRU, with PyTorch's parameters (weight_ih_l{k}[_reverse], weight_hh_l{k},
// bias_ih_l{k}, bias_hh_l{k}; gates stacked i|f|g|o and r|z|n), equations, initialization
// (U(-1/sqrt(H), 1/sqrt(H))), layouts ([T, B, in], or [B, T, in] with batch_first) and
// inter-layer dropout. Each step is ordinary ops (one product for the whole sequence's input
// projection, one per step for the hidden state), so both run and differentiate on every device.

#include <optional>
#include <tuple>
#include <vector>

#include "ember/nn/module.h"
#include "ember/nn/module_holder.h"
#include "ember/nn/options.h"

namespace ember::nn {

struct RNNOptions {
  RNNOptions(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  EMBER_ARG(int64_t, input_size);
  EMBER_ARG(int64_t, hidden_size);
  EMBER_ARG(int64_t, num_layers) = 1;
  EMBER_ARG(bool, bias) = true;
  EMBER_ARG(bool, batch_first) = false;
  EMBER_ARG(double, dropout) = 0;  // on each layer's output but the last, in training
  EMBER_ARG(bool, bidirectional) = false;
};
using LSTMOptions = RNNOptions;
using GRUOptions = RNNOptions;

// What LSTM and GRU share: the options, the parameters of each layer and direction, and the
// walk over layers, directions and time steps.
class RNNBase : public Module {
 public:
  RNNBase(std::string name, const RNNOptions& options, int64_t gates);
  void reset_parameters();
  std::string extra_repr() const override;

  RNNOptions options;
  // Per layer and direction (layer * directions + direction): weight_ih, weight_hh, bias_ih, bias_hh.
  std::vector<std::vector<Tensor>> all_weights;

 protected:
  // One step of the cell: the new states from the input projection x_gates [B, gates * H]
  // (biases included) and the current states.
  using Cell = std::vector<Tensor> (*)(const Tensor& x_gates, const std::vector<Tensor>& state,
                                       const Tensor& weight_hh, const Tensor& bias_hh);
  // The output [T, B, directions * H] (or batch-first) and the final states, each
  // [layers * directions, B, H]; `state` holds the initial ones (zeros when empty).
  std::pair<Tensor, std::vector<Tensor>> run(const Tensor& input, std::vector<Tensor> state, Cell cell,
                                             const char* op) const;

 private:
  int64_t gates_;
};

class LSTMImpl : public RNNBase {
 public:
  LSTMImpl(int64_t input_size, int64_t hidden_size) : LSTMImpl(LSTMOptions(input_size, hidden_size)) {}
  explicit LSTMImpl(const LSTMOptions& options);
  // (output, (h_n, c_n)); hx = (h_0, c_0), zeros when absent.
  std::tuple<Tensor, std::tuple<Tensor, Tensor>> forward(
      const Tensor& input, const std::optional<std::tuple<Tensor, Tensor>>& hx = std::nullopt);
};
EMBER_MODULE(LSTM);

class GRUImpl : public RNNBase {
 public:
  GRUImpl(int64_t input_size, int64_t hidden_size) : GRUImpl(GRUOptions(input_size, hidden_size)) {}
  explicit GRUImpl(const GRUOptions& options);
  // (output, h_n); hx = h_0, zeros when undefined.
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& hx = {});
};
EMBER_MODULE(GRU);

}  // namespace ember::nn
