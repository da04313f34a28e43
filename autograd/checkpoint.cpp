// Checkpointing through saved-tensor hooks, as PyTorch's non-reentrant checkpoint
// (torch/utils/checkpoint.py): the forward runs fn under a pack hook that keeps one empty holder
// per saved tensor; the first unpack reruns fn under a hook that fills the holders in the order
// they were made. Gradients flow through the graph the forward recorded, so parameters fn
// captures get theirs as usual; the engine knows nothing of checkpoints (STYLE.md #11).
#include "ember/autograd/checkpoint.h"

#include <array>
#include <memory>
#include <optional>

#include "ember/core/autocast_mode.h"
#include "ember/core/autograd_meta.h"
#include "ember/core/generator.h"
#include "ember/core/grad_mode.h"

namespace ember::autograd {
namespace {

// The default generators' states (one per device type): what the recomputation draws from, so
// dropout masks match the forward's.
struct ForwardState {
  PhiloxState rng[kNumDeviceTypes];

  static ForwardState current() {
    ForwardState s;
    for (int i = 0; i < kNumDeviceTypes; ++i)
      s.rng[i] = default_generator(static_cast<DeviceType>(i)).get_state();
    return s;
  }
  void apply() const {
    for (int i = 0; i < kNumDeviceTypes; ++i) default_generator(static_cast<DeviceType>(i)).set_state(rng[i]);
  }
};

// Puts `forward` in place for its scope, then restores what was there (torch.random.fork_rng).
class ReplayState {
 public:
  explicit ReplayState(const ForwardState& forward) : saved_(ForwardState::current()) { forward.apply(); }
  ~ReplayState() { saved_.apply(); }
  ReplayState(const ReplayState&) = delete;
  ReplayState& operator=(const ReplayState&) = delete;

 private:
  ForwardState saved_;
};

// Each device type's autocast switch and dtype at the forward: the recomputation runs in them,
// though backward itself runs with autocast off.
struct AutocastState {
  bool enabled[kNumDeviceTypes];
  ScalarType dtype[kNumDeviceTypes];

  static AutocastState current() {
    AutocastState s;
    for (int i = 0; i < kNumDeviceTypes; ++i) {
      s.enabled[i] = amp::is_autocast_enabled(static_cast<DeviceType>(i));
      s.dtype[i] = amp::get_autocast_dtype(static_cast<DeviceType>(i));
    }
    return s;
  }
};

// Enters `forward`'s autocast regions for its scope; on exit the enclosing (backward's) state,
// autocast off included, comes back.
class AutocastReplay {
 public:
  explicit AutocastReplay(const AutocastState& forward) {
    for (int i = 0; i < kNumDeviceTypes; ++i)
      guards_[i].emplace(static_cast<DeviceType>(i), forward.dtype[i], forward.enabled[i]);
  }

 private:
  amp::detail::ExcludeAutocastGuard restore_pending_;  // declared first: destroyed after the guards
  std::array<std::optional<amp::AutocastGuard>, kNumDeviceTypes> guards_;
};

// One tensor the forward saved: its metadata, and its value once recomputed.
struct Holder {
  TensorMeta meta;
  Tensor value;
};

std::string describe(const TensorMeta& m) {
  return detail::str_cat(IntArrayRef(m.sizes), " ", m.dtype, " on ", m.device);
}

class Frame : public std::enable_shared_from_this<Frame> {
 public:
  Frame(CheckpointFunction fn, const std::vector<Tensor>& inputs, const CheckpointOptions& options)
      : fn_(std::move(fn)),
        preserve_rng_(options.preserve_rng_state),
        state_(ForwardState::current()),
        autocast_(AutocastState::current()) {
    // Saved under the hooks around this call: a nesting checkpoint recomputes them too.
    for (const Tensor& t : inputs) inputs_.emplace_back(t, /*is_output=*/false);
  }

  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) {
    std::vector<Tensor> outputs;
    {
      SavedTensorHooks hooks([this](const Tensor& t) { return pack(t); });
      outputs = fn_(inputs);
    }
    forward_done_ = true;
    return outputs;
  }

 private:
  UnpackHook pack(const Tensor& t) {
    auto holder = std::make_shared<Holder>(Holder{{DimVector(t.sizes()), t.dtype(), t.device()}, Tensor()});
    holders_.push_back(holder);
    return [self = shared_from_this(), holder] {
      if (!holder->value.defined()) self->recompute();
      return holder->value;
    };
  }

  void recompute();

  CheckpointFunction fn_;
  std::vector<SavedTensor> inputs_;
  bool preserve_rng_;
  ForwardState state_;
  AutocastState autocast_;
  // Owned by the saved tensors of the recorded nodes: a node freed by backward needs nothing.
  std::vector<std::weak_ptr<Holder>> holders_;
  bool forward_done_ = false;
};

void Frame::recompute() {
  EMBER_CHECK(
      forward_done_,
      "checkpoint: a backward inside the checkpointed function needs tensors saved in it; that is not "
      "supported");
  std::vector<Tensor> args;
  for (const SavedTensor& s : inputs_) args.push_back(s.unpack_input("checkpoint"));
  struct Fill {
    std::shared_ptr<Holder> holder;
    Tensor value;
    uint32_t version;
  };
  std::vector<Fill> fills;
  size_t count = 0;
  {
    std::optional<ReplayState> replay;
    if (preserve_rng_) replay.emplace(state_);
    AutocastReplay autocast(autocast_);
    EnableGradGuard grad;
    SavedTensorHooks hooks([&](const Tensor& t) -> UnpackHook {
      size_t i = count++;
      EMBER_CHECK(i < holders_.size(),
                  "checkpoint: the recomputation saved more tensors for backward than the forward did (",
                  holders_.size(), "); the function must run the same ops when run again");
      if (std::shared_ptr<Holder> h = holders_[i].lock()) {
        TensorMeta now{DimVector(t.sizes()), t.dtype(), t.device()};
        EMBER_CHECK(now.sizes == h->meta.sizes && now.dtype == h->meta.dtype && now.device == h->meta.device,
                    "checkpoint: saved tensor ", i, " was ", describe(h->meta), " in the forward but ",
                    describe(now),
                    " in the recomputation; the function must run the same ops when run again");
        fills.push_back({h, t.detach(), t._version()});
      }
      return [t = t.detach()] { return t; };
    });
    fn_(args);
  }
  EMBER_CHECK(count == holders_.size(), "checkpoint: the recomputation saved ", count,
              " tensors for backward but the forward saved ", holders_.size(),
              "; the function must run the same ops when run again");
  for (const Fill& f : fills)
    EMBER_CHECK(f.value._version() == f.version,
                "checkpoint: one of the variables needed for gradient computation has been modified by an "
                "inplace operation later in the checkpointed function: ",
                describe(f.holder->meta), " is at version ", f.value._version(), "; expected version ",
                f.version, " instead");
  for (Fill& f : fills) f.holder->value = std::move(f.value);
}

void check_outputs(const std::vector<Tensor>& outputs) {
  EMBER_CHECK(!outputs.empty(), "checkpoint: the function returned no tensors");
  for (size_t i = 0; i < outputs.size(); ++i)
    EMBER_CHECK(outputs[i].defined(), "checkpoint: output ", i, " of the function is an undefined tensor");
}

}  // namespace

std::vector<Tensor> checkpoint(CheckpointFunction fn, const std::vector<Tensor>& inputs,
                               CheckpointOptions options) {
  EMBER_CHECK(fn, "checkpoint: the function is empty");
  std::vector<Tensor> outputs;
  if (!GradMode::is_enabled()) {
    outputs = fn(inputs);  // nothing is saved, so nothing to recompute
  } else {
    auto frame = std::make_shared<Frame>(std::move(fn), inputs, options);
    outputs = frame->forward(inputs);
  }
  check_outputs(outputs);
  return outputs;
}

Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
                  CheckpointOptions options) {
  EMBER_CHECK(fn, "checkpoint: the function is empty");
  return checkpoint([fn](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; }, {input},
                    options)[0];
}

}  // namespace ember::autograd
