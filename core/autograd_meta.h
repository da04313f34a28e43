#pragma once

// The recorded graph: what an op leaves behind when grad mode is on and an input requires grad.
// It lives in core, beside the ops, because every op frontend records its own backward formula
// (written with ember ops, so it runs on any device and can be differentiated again);
// autograd/ walks the graph (engine, gradcheck, anomaly mode).

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ember/core/tensor.h"

namespace ember {

class Node;

// What a node's backward and the engine (autograd/engine.cpp) pass each other besides the
// gradients, so that a backward can fuse work its neighbours would do in kernels of their own:
//  - offered, taken (a slot per input): the gradient each input has already received from
//    consumers whose backward ran first. A backward may add its own gradient of input i into
//    offered[i] in the kernel that computes it (a product's epilogue, beta = 1) and set taken[i];
//    the engine then passes offered[i] on as input i's gradient instead of adding the two.
//    Offered only where the engine holds the sole reference (so writing it in place is safe), and
//    never under create_graph or anomaly mode.
//  - row_sums (a slot per output): the sums over every dim but the last of that output's
//    gradient, in float32 (float64 for float64), where the backward that produced the gradient
//    computed them on the way because this node asked (Node::want_grad_row_sums): a linear's bias
//    gradient without reading its output's gradient again. Only for a gradient that arrived alone,
//    in its slot's dtype, to an output without hooks.
//  - input_row_sums (a slot per input): a backward's row sums of the gradients it returns, for the
//    inputs whose next node asks (GradContext::set_row_sums).
struct BackwardExtras {
  std::vector<Tensor> offered;
  std::vector<bool> taken;
  std::vector<Tensor> row_sums;
  std::vector<Tensor> input_row_sums;
};

// Gradients sent along an edge reach input slot `input_nr` of `node`.
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
  bool valid() const { return node != nullptr; }
};

// Shape, dtype and device of one forward output: for checking gradients and making zeros.
struct TensorMeta {
  DimVector sizes;
  ScalarType dtype;
  Device device;
};

// A node of the backward graph: takes the gradients of a forward op's outputs (one per output,
// zeros where unused) and returns those of its inputs, one per next edge (undefined: none).
class Node : public std::enable_shared_from_this<Node> {
 public:
  using GradHook = std::function<Tensor(const Tensor&)>;

  Node(std::string name, std::vector<Edge> next_edges);
  virtual ~Node() = default;

  virtual std::vector<Tensor> apply(std::vector<Tensor> grads, BackwardExtras& extras) = 0;
  // Frees saved tensors once backward has used them (unless retain_graph).
  virtual void release_saved() {}

  const std::string& name() const { return name_; }
  const std::vector<Edge>& next_edges() const { return next_edges_; }
  const std::vector<TensorMeta>& output_meta() const { return outputs_; }
  uint64_t sequence_nr() const { return sequence_nr_; }
  uint32_t add_output(const Tensor& t);

  // Hooks on the gradient of one output (Tensor::register_hook on a non-leaf); each may
  // return a replacement gradient (or an undefined tensor to keep it).
  void add_pre_hook(uint32_t output_nr, GradHook hook) {
    pre_hooks_.emplace_back(output_nr, std::move(hook));
  }
  // retain_grad's hook: runs after all the other hooks, as in PyTorch.
  void add_retain_grad_hook(uint32_t output_nr, GradHook hook) {
    retain_hooks_.emplace_back(output_nr, std::move(hook));
  }
  // Runs the hooks on `grads` (one per output), in order.
  void run_pre_hooks(std::vector<Tensor>& grads) const;
  bool has_grad_hooks(uint32_t output_nr) const;  // pre-hooks or retain_grad's

  // Asks the backward that produces output `output_nr`'s gradient for its row sums
  // (BackwardExtras); outputs past the 32nd are never asked for.
  void want_grad_row_sums(uint32_t output_nr) {
    if (output_nr < 32) row_sums_wanted_ |= 1u << output_nr;
  }
  bool wants_grad_row_sums(uint32_t output_nr) const {
    return output_nr < 32 && (row_sums_wanted_ >> output_nr & 1u);
  }

 private:
  std::string name_;
  std::vector<Edge> next_edges_;
  std::vector<TensorMeta> outputs_;
  std::vector<std::pair<uint32_t, GradHook>> pre_hooks_;
  std::vector<std::pair<uint32_t, GradHook>> retain_hooks_;
  uint64_t sequence_nr_;
  uint32_t row_sums_wanted_ = 0;
};

// Per-tensor autograd state, allocated only for tensors that take part in autograd.
struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;                    // leaves
  std::shared_ptr<Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;         // which output of grad_fn this tensor is
  std::weak_ptr<Node> grad_accumulator;
  std::shared_ptr<Tensor> retained_grad;  // non-leaves after retain_grad()
  bool is_view = false;                   // made by a view op from a tensor with history
  std::vector<Node::GradHook> hooks;      // leaves: run before accumulation
  std::vector<std::function<void(const Tensor&)>> post_accumulate_hooks;
  // Leaves: autocast's lower-precision cast kept beyond its region for a fused optimizer that
  // updates it with the leaf (core/autocast_mode.h), and the value it was made from.
  struct KeptCast {
    bool wanted = false;  // a fused optimizer asked for it
    Tensor copy;          // without autograd state
    const StorageImpl* storage = nullptr;
    int64_t storage_offset = 0;
    uint32_t version = 0;
  } kept_cast;
};

// Saved-tensor hooks, as torch.autograd.graph.saved_tensors_hooks in C++ form: while a guard is
// alive on this thread, each tensor an op saves for backward goes to `pack`, and the SavedTensor
// keeps only what pack returns, the function backward calls to get the tensor back. The innermost
// guard wins; pack itself runs without hooks. Checkpointing (autograd/checkpoint.h) is built on it.
using UnpackHook = std::function<Tensor()>;
using PackHook = std::function<UnpackHook(const Tensor&)>;

class SavedTensorHooks {
 public:
  explicit SavedTensorHooks(PackHook pack);
  ~SavedTensorHooks();
  SavedTensorHooks(const SavedTensorHooks&) = delete;
  SavedTensorHooks& operator=(const SavedTensorHooks&) = delete;

 private:
  PackHook pack_;
  const PackHook* prev_;
};

// A tensor saved for backward. Checks on unpack that no in-place op changed it since. A saved
// output keeps no reference to its own grad_fn (that would be a cycle): the node restores it.
// Under saved-tensor hooks it keeps the unpack hook and the tensor's place in the graph instead
// of the tensor (no version check then: the hook owns the data).
class SavedTensor {
 public:
  SavedTensor() = default;
  // A saved output must say which output of its node it is (output_nr).
  SavedTensor(const Tensor& t, bool is_output, uint32_t output_nr = 0);
  // `owner` is the node unpacking (needed for saved outputs; its name is the op in errors).
  Tensor unpack(Node& owner) const;
  // A saved input kept outside any node (checkpoint's inputs); `who` names the holder in errors.
  Tensor unpack_input(const std::string& who) const;
  bool defined() const { return data_.defined() || hooked_ != nullptr; }

 private:
  struct Hooked {
    UnpackHook unpack;
    Edge edge;  // where the gradient of a saved input went (valid only when it required grad)
    bool leaf = false;
  };
  Tensor unpack(const std::string& who, Node* owner) const;

  Tensor data_;  // for outputs: an alias without autograd state
  std::shared_ptr<const Hooked> hooked_;
  uint32_t version_ = 0;
  bool is_output_ = false;
  bool requires_grad_ = false;
  uint32_t output_nr_ = 0;
};

// What a backward formula sees: the output gradients and which inputs need theirs.
class GradContext {
 public:
  GradContext(const std::vector<Tensor>& grads, Node& node, BackwardExtras& extras)
      : grads_(grads), node_(node), extras_(extras) {}
  const Tensor& grad(size_t output = 0) const { return grads_[output]; }
  bool needs(size_t input) const { return node_.next_edges()[input].valid(); }
  Tensor operator()(const SavedTensor& s) const { return s.unpack(node_); }
  // The gradient input `input` has received so far, if the engine offers it (BackwardExtras).
  const Tensor& accumulated(size_t input) const { return extras_.offered[input]; }
  // Takes it: the backward then returns it, with its own gradient of `input` added in place.
  Tensor take_accumulated(size_t input) const {
    extras_.taken[input] = true;
    return extras_.offered[input];
  }
  // The row sums of output `output`'s gradient, if its producer computed them (BackwardExtras).
  const Tensor& grad_row_sums(size_t output = 0) const { return extras_.row_sums[output]; }
  // Whether the node that receives input `input`'s gradient asks for its row sums, and handing
  // them over with the gradient.
  bool row_sums_wanted(size_t input) const {
    const Edge& e = node_.next_edges()[input];
    return e.valid() && e.node->wants_grad_row_sums(e.input_nr);
  }
  void set_row_sums(size_t input, Tensor sums) const { extras_.input_row_sums[input] = std::move(sums); }

 private:
  const std::vector<Tensor>& grads_;
  Node& node_;
  BackwardExtras& extras_;
};

using BackwardFn = std::function<std::vector<Tensor>(const GradContext&)>;

// Whether an op on these inputs must record: grad mode on and some input requires grad.
bool needs_grad(ArrayRef<Tensor> inputs);

// Records op `name`: a node with `backward` and edges to the inputs' histories becomes the
// grad_fn of every floating output. Call only when needs_grad(inputs).
void record(const char* name, ArrayRef<Tensor> inputs, ArrayRef<Tensor> outputs, BackwardFn backward);

// In-place ops without a recorded backward (copy_, fill_, masked_fill_, random fills, ...)
// under grad mode: refuses a leaf that requires grad (as PyTorch does) and any operand with
// history.
// `tensors` is the written tensor first, then the other operands.
void check_inplace(const char* op, std::initializer_list<Tensor> tensors);

// For in-place ops that record their backward (elementwise ones): refuses a leaf that requires
// grad and a view of a tensor with history (ember does not yet rewrite the base's graph).
void check_inplace_differentiable(const char* op, const Tensor& self);

// Where gradients for `t` go: its grad_fn, or its leaf's accumulator (invalid if no grad).
Edge gradient_edge(const Tensor& t);

// Sums a broadcast gradient back to `sizes` (the shape an input had before broadcasting).
Tensor sum_to(const Tensor& grad, IntArrayRef sizes);

}  // namespace ember
