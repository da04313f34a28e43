#include "ember/core/autograd_meta.h"

#include <atomic>

#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/ops/reduce.h"

namespace ember {
namespace {

std::atomic<uint64_t> next_sequence_nr{0};

// A node whose backward is a formula (a closure over SavedTensors and plain values).
class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, std::vector<Edge> edges, BackwardFn fn)
      : Node(std::move(name), std::move(edges)), fn_(std::move(fn)) {}

  std::vector<Tensor> apply(std::vector<Tensor> grads, BackwardExtras& extras) override {
    EMBER_CHECK(fn_, name(),
                ": trying to backward through the graph a second time (or to use saved tensors after they "
                "were freed). Saved values are freed by backward() unless retain_graph=true");
    return fn_(GradContext(grads, *this, extras));
  }
  void release_saved() override { fn_ = nullptr; }

 private:
  BackwardFn fn_;
};

// Whether grad is laid out as a gradient of `leaf` should be: with the leaf's strides (size-1 dims
// aside) when the leaf is dense, else contiguous.
bool obeys_layout_contract(const Tensor& grad, const Tensor& leaf) {
  return leaf.is_non_overlapping_and_dense() ? same_dense_layout(grad, leaf) : grad.is_contiguous();
}

// The sink of a leaf: adds incoming gradients into its .grad (PyTorch's AccumulateGrad).
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor leaf) : Node("AccumulateGrad", {}), leaf_(std::move(leaf)) {
    add_output(leaf_);
  }

  std::vector<Tensor> apply(std::vector<Tensor> grads, BackwardExtras&) override {
    AutogradMeta& meta = *leaf_.impl().autograd_meta();
    Tensor g = std::move(grads[0]);
    for (const auto& hook : meta.hooks)
      if (Tensor r = hook(g); r.defined()) g = r;
    if (!meta.grad.defined()) {
      // Keep the graph only for create_graph; never alias a buffer someone else holds (the
      // tensor or its storage: a slice of another gradient), else take the gradient as it is. A
      // copy takes the leaf's strides when the leaf is dense (PyTorch's gradient layout
      // contract), so an NHWC parameter gets an NHWC gradient.
      const bool sole_owner = g.use_count() == 1 && g.impl().storage().use_count() == 1;
      if (GradMode::is_enabled())
        meta.grad = g;
      else if (!sole_owner || !obeys_layout_contract(g, leaf_))
        meta.grad =
            leaf_.is_non_overlapping_and_dense() ? empty_like(leaf_, g.options()).copy_(g) : g.contiguous();
      else
        meta.grad = g.detach();
    } else if (GradMode::is_enabled()) {
      meta.grad = meta.grad + g;
    } else {
      meta.grad.add_(g);
    }
    for (const auto& hook : meta.post_accumulate_hooks) hook(leaf_);
    return {};
  }

 private:
  Tensor leaf_;
};

AutogradMeta& meta_of(const Tensor& t) {
  TensorImpl& impl = t.impl();
  if (!impl.autograd_meta()) impl.set_autograd_meta(std::make_unique<AutogradMeta>());
  return *impl.autograd_meta();
}

// A fresh alias of `data` whose gradient flows along `edge`: into its node, or into the
// accumulator of the leaf it stands for.
Tensor with_history(const Tensor& data, const Edge& edge, bool leaf) {
  Tensor t = data.detach();
  AutogradMeta& m = meta_of(t);
  m.requires_grad = true;
  if (leaf) {
    m.grad_accumulator = edge.node;
  } else {
    m.grad_fn = edge.node;
    m.output_nr = edge.input_nr;
  }
  return t;
}

thread_local const PackHook* current_pack_hook = nullptr;

}  // namespace

Node::Node(std::string name, std::vector<Edge> next_edges)
    : name_(std::move(name)), next_edges_(std::move(next_edges)), sequence_nr_(next_sequence_nr++) {}

void Node::run_pre_hooks(std::vector<Tensor>& grads) const {
  for (const auto* hooks : {&pre_hooks_, &retain_hooks_})
    for (const auto& [slot, hook] : *hooks)
      if (grads[slot].defined())
        if (Tensor r = hook(grads[slot]); r.defined()) grads[slot] = r;
}

bool Node::has_grad_hooks(uint32_t output_nr) const {
  for (const auto* hooks : {&pre_hooks_, &retain_hooks_})
    for (const auto& [slot, hook] : *hooks)
      if (slot == output_nr) return true;
  return false;
}

uint32_t Node::add_output(const Tensor& t) {
  outputs_.push_back({DimVector(t.sizes()), t.dtype(), t.device()});
  return static_cast<uint32_t>(outputs_.size() - 1);
}

SavedTensorHooks::SavedTensorHooks(PackHook pack) : pack_(std::move(pack)), prev_(current_pack_hook) {
  EMBER_CHECK(pack_, "SavedTensorHooks: the pack hook is empty");
  current_pack_hook = &pack_;
}

SavedTensorHooks::~SavedTensorHooks() { current_pack_hook = prev_; }

SavedTensor::SavedTensor(const Tensor& t, bool is_output, uint32_t output_nr)
    : is_output_(is_output), output_nr_(output_nr) {
  if (!t.defined()) return;
  version_ = t._version();
  // An output is saved before record() marks it, and only when the op is recorded.
  requires_grad_ = is_output ? t.is_floating_point() : t.requires_grad();
  if (const PackHook* pack = current_pack_hook) {
    auto hooked = std::make_shared<Hooked>();
    if (!is_output && requires_grad_) {
      hooked->edge = gradient_edge(t);
      hooked->leaf = t.is_leaf();
    }
    struct Restore {
      const PackHook* hook;
      ~Restore() { current_pack_hook = hook; }
    } restore{pack};
    current_pack_hook = nullptr;
    hooked->unpack = (*pack)(t);
    EMBER_CHECK(hooked->unpack, "SavedTensorHooks: the pack hook returned an empty unpack function");
    hooked_ = std::move(hooked);
    return;
  }
  data_ = is_output ? t.detach() : t;
}

Tensor SavedTensor::unpack(Node& owner) const { return unpack(owner.name(), &owner); }

Tensor SavedTensor::unpack_input(const std::string& who) const {
  EMBER_CHECK(!is_output_, who, ": unpack_input is for saved inputs, not saved outputs");
  return unpack(who, nullptr);
}

Tensor SavedTensor::unpack(const std::string& who, Node* owner) const {
  // Saved outputs and hooked inputs get their place in the graph back, so create_graph can go
  // through them.
  if (hooked_) {
    Tensor t = hooked_->unpack();
    EMBER_CHECK(t.defined(), who, ": a saved-tensor unpack hook returned an undefined tensor");
    if (is_output_)
      return requires_grad_ ? with_history(t, {owner->shared_from_this(), output_nr_}, false) : t;
    return hooked_->edge.valid() ? with_history(t, hooked_->edge, hooked_->leaf) : t;
  }
  if (!data_.defined()) return data_;
  EMBER_CHECK(
      data_._version() == version_,
      "one of the variables needed for gradient computation has been modified by an inplace operation: [",
      data_.dtype(), " ", data_.sizes(), "], which is ", is_output_ ? "output " : "saved by ",
      is_output_ ? std::to_string(output_nr_) + " of " : std::string(), who, ", is at version ",
      data_._version(), "; expected version ", version_, " instead");
  if (!is_output_ || !requires_grad_) return data_;
  return with_history(data_, {owner->shared_from_this(), output_nr_}, false);
}

bool needs_grad(ArrayRef<Tensor> inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void check_inplace(const char* op, std::initializer_list<Tensor> tensors) {
  if (!GradMode::is_enabled()) return;
  const Tensor& self = *tensors.begin();
  EMBER_CHECK(!(self.requires_grad() && self.is_leaf()), op,
              ": a leaf tensor that requires grad is being used in an in-place operation (wrap the update in "
              "NoGradGuard, or use the out-of-place op)");
  for (const Tensor& t : tensors)
    EMBER_CHECK(
        !t.defined() || !t.requires_grad(), op,
        ": in-place operations on tensors that require grad are not supported by autograd yet; use the "
        "out-of-place op");
}

void check_inplace_differentiable(const char* op, const Tensor& self) {
  if (!GradMode::is_enabled() || !self.requires_grad()) return;
  EMBER_CHECK(!self.is_leaf(), op,
              ": a leaf tensor that requires grad is being used in an in-place operation (wrap the update in "
              "NoGradGuard, or use the out-of-place op)");
  EMBER_CHECK(
      !self.impl().autograd_meta()->is_view, op,
      ": in-place operations on a view of a tensor that requires grad are not supported by autograd yet; "
      "use the out-of-place op");
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  AutogradMeta& m = *t.impl().autograd_meta();
  if (m.grad_fn) return {m.grad_fn, m.output_nr};
  std::shared_ptr<Node> acc = m.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    m.grad_accumulator = acc;
  }
  return {acc, 0};
}

void record(const char* name, ArrayRef<Tensor> inputs, ArrayRef<Tensor> outputs, BackwardFn backward) {
  std::vector<Edge> edges;
  edges.reserve(inputs.size());
  for (const Tensor& t : inputs) edges.push_back(gradient_edge(t));
  auto node = std::make_shared<FunctionNode>(name, std::move(edges), std::move(backward));
  for (const Tensor& out : outputs) {
    uint32_t nr = node->add_output(out);
    if (!out.is_floating_point()) continue;
    AutogradMeta& m = meta_of(out);
    m.requires_grad = true;
    m.grad_fn = node;
    m.output_nr = nr;
  }
}

Tensor sum_to(const Tensor& grad, IntArrayRef sizes) {
  if (grad.sizes().equals(sizes)) return grad;
  int64_t lead = grad.dim() - static_cast<int64_t>(sizes.size());
  DimVector dims;
  for (int64_t d = 0; d < grad.dim(); ++d)
    if (d < lead || (sizes[d - lead] == 1 && grad.size(d) != 1)) dims.push_back(d);
  Tensor r = dims.empty() ? grad : grad.sum(dims, /*keepdim=*/true);
  return r.reshape(sizes);
}

// --- Tensor's autograd API ---

bool Tensor::requires_grad() const {
  const AutogradMeta* m = impl().autograd_meta();
  return m && m->requires_grad;
}

const Tensor& Tensor::requires_grad_(bool on) const {
  EMBER_CHECK(!on || is_floating_point(), "requires_grad_: only tensors of floating point dtype can require ",
              "gradients, got ", dtype());
  AutogradMeta* m = impl().autograd_meta();
  EMBER_CHECK(!(m && m->grad_fn) || on, "requires_grad_: you can only change requires_grad flags of leaf ",
              "variables (this tensor is an output of ", m && m->grad_fn ? m->grad_fn->name() : "", ")");
  if (on || m) meta_of(*this).requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const {
  const AutogradMeta* m = impl().autograd_meta();
  if (!m) return Tensor();
  return m->retained_grad ? *m->retained_grad : m->grad;
}

void Tensor::set_grad(const Tensor& g) const {
  EMBER_CHECK(!g.defined() || g.sizes().equals(sizes()), "set_grad: assigned grad has shape ", g.sizes(),
              " but the tensor has shape ", sizes());
  meta_of(*this).grad = g;
}

std::shared_ptr<Node> Tensor::grad_fn() const {
  const AutogradMeta* m = impl().autograd_meta();
  return m ? m->grad_fn : nullptr;
}

bool Tensor::is_leaf() const { return grad_fn() == nullptr; }

void Tensor::retain_grad() const {
  EMBER_CHECK(requires_grad(), "retain_grad: can't retain_grad on a tensor that doesn't require gradients");
  AutogradMeta& m = meta_of(*this);
  if (!m.grad_fn || m.retained_grad) return;
  // The hook shares the slot, not the tensor: the graph must not keep a dead tensor alive.
  auto slot = std::make_shared<Tensor>();
  m.retained_grad = slot;
  m.grad_fn->add_retain_grad_hook(m.output_nr, [slot](const Tensor& g) {
    *slot = slot->defined() ? *slot + g : g.detach();
    return Tensor();
  });
}

bool Tensor::retains_grad() const {
  const AutogradMeta* m = impl().autograd_meta();
  return m && m->retained_grad;
}

Tensor Tensor::detach() const {
  return Tensor(
      IntrusivePtr<TensorImpl>::make(impl().storage(), dtype(), sizes(), strides(), storage_offset()));
}

const Tensor& Tensor::detach_() const {
  if (AutogradMeta* m = impl().autograd_meta()) {
    m->grad_fn = nullptr;
    m->requires_grad = false;
  }
  return *this;
}

void Tensor::set_data(const Tensor& new_data) const {
  EMBER_CHECK(new_data.defined(), "set_data: the new data is undefined");
  EMBER_CHECK(!requires_grad() || new_data.is_floating_point(),
              "set_data: a tensor that requires grad needs floating point data, got ", new_data.dtype());
  // A cached gradient sink checks gradients against the old dtype, device and shape: drop it
  // when they change (graphs recorded before keep theirs), as PyTorch does.
  AutogradMeta* m = impl().autograd_meta();
  if (m &&
      (new_data.dtype() != dtype() || new_data.device() != device() || !new_data.sizes().equals(sizes())))
    m->grad_accumulator.reset();
  impl().set_data(new_data.impl());
}

void Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  EMBER_CHECK(requires_grad(),
              "register_hook: cannot register a hook on a tensor that doesn't require gradient");
  AutogradMeta& m = meta_of(*this);
  if (m.grad_fn)
    m.grad_fn->add_pre_hook(m.output_nr, std::move(hook));
  else
    m.hooks.push_back(std::move(hook));
}

void Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const {
  EMBER_CHECK(requires_grad() && is_leaf(),
              "register_post_accumulate_grad_hook: only leaf tensors that require ",
              "grad have a gradient to accumulate");
  meta_of(*this).post_accumulate_hooks.push_back(std::move(hook));
}

}  // namespace ember
