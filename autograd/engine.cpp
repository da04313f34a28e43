// The backward engine: counts each node's dependencies from the roots, then runs nodes from a
// ready queue (latest-created first) once all their incoming gradients have arrived. It offers a
// backward the gradients its inputs already hold, to add its own into in the kernel that computes
// it, and passes on the row sums a backward computed for the next node (BackwardExtras).
// Single-threaded; CUDA work stays ordered by the stream.
#include "ember/autograd/engine.h"

#include <cmath>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "ember/core/autocast_mode.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/op_range.h"
#include "ember/core/ops/reduce.h"

namespace ember::autograd {
namespace {

thread_local bool anomaly_enabled = false;
thread_local std::vector<std::function<void()>>* callbacks = nullptr;

struct ByNewest {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

// Checks a gradient against the metadata of the slot it flows into; casts dtype like PyTorch.
Tensor validate(const Node& producer, size_t index, Tensor g, const TensorMeta& expected) {
  EMBER_CHECK(g.sizes().equals(expected.sizes), "backward of ", producer.name(),
              " returned an invalid gradient at index ", index, ": got shape ", g.sizes(), " but expected ",
              IntArrayRef(expected.sizes));
  EMBER_CHECK(g.device() == expected.device || expected.device.index < 0 || g.device().index < 0,
              "backward of ", producer.name(), " returned a gradient at index ", index, " on ", g.device(),
              " but expected ", expected.device);
  if (g.dtype() != expected.dtype) g = g.to(expected.dtype);
  return g;
}

bool has_nan(const Tensor& t) {
  return t.is_floating_point() && t.numel() > 0 && (t != t).any().item<bool>();
}

struct Task {
  std::vector<Tensor> buffer;    // one slot per forward output of the node
  std::vector<Tensor> row_sums;  // of a slot's gradient, where its producer gave them (BackwardExtras)
};

// Runs the graph from (edge, grad) roots. With `capture`, gradients arriving at those edges are
// returned instead of flowing on (autograd::grad), and leaves are not accumulated into.
std::vector<Tensor> run(const std::vector<Edge>& roots, const std::vector<Tensor>& root_grads,
                        bool keep_graph, bool create_graph, const std::vector<Edge>* capture) {
  std::unordered_map<Node*, int> deps;
  std::unordered_map<Node*, std::shared_ptr<Node>> owner;
  std::vector<Node*> stack;
  for (const Edge& e : roots) {
    if (owner.emplace(e.node.get(), e.node).second) stack.push_back(e.node.get());
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges()) {
      if (!e.valid()) continue;
      ++deps[e.node.get()];
      if (owner.emplace(e.node.get(), e.node).second) stack.push_back(e.node.get());
    }
  }

  std::unordered_map<const Node*, std::vector<std::pair<uint32_t, size_t>>> captured_at;
  std::vector<Tensor> captured;
  if (capture) {
    captured.resize(capture->size());
    for (size_t i = 0; i < capture->size(); ++i)
      if ((*capture)[i].valid()) captured_at[(*capture)[i].node.get()].push_back({(*capture)[i].input_nr, i});
  }

  std::unordered_map<Node*, Task> tasks;
  std::priority_queue<Node*, std::vector<Node*>, ByNewest> ready;
  // Row sums stay with a gradient that arrives alone; a sum of gradients has none.
  auto deliver = [&](Node* n, uint32_t slot, Tensor g, Tensor row_sums = {}) {
    Task& t = tasks[n];
    if (t.buffer.empty()) t.buffer.resize(n->output_meta().size());
    if (t.row_sums.empty()) t.row_sums.resize(n->output_meta().size());
    Tensor& b = t.buffer[slot];
    t.row_sums[slot] = b.defined() ? Tensor() : std::move(row_sums);
    b = b.defined() ? b + g : g;
  };
  // n's BackwardExtras: moves out each gradient an input of n has received that the engine alone
  // holds, unless two of n's edges lead to the same slot; hands over its gradients' row sums.
  auto extras_for = [&](Node& n, std::vector<Tensor> row_sums) {
    const auto& edges = n.next_edges();
    BackwardExtras acc{std::vector<Tensor>(edges.size()), std::vector<bool>(edges.size(), false),
                       std::move(row_sums), std::vector<Tensor>(edges.size())};
    acc.row_sums.resize(n.output_meta().size());
    for (uint32_t o = 0; o < acc.row_sums.size(); ++o)
      if (n.has_grad_hooks(o)) acc.row_sums[o] = Tensor();
    if (create_graph || anomaly_enabled) return acc;
    for (size_t i = 0; i < edges.size(); ++i) {
      auto it = edges[i].valid() ? tasks.find(edges[i].node.get()) : tasks.end();
      if (it == tasks.end() || it->second.buffer.empty()) continue;
      Tensor& b = it->second.buffer[edges[i].input_nr];
      bool shared_slot = false;
      for (size_t j = 0; j < edges.size(); ++j)
        shared_slot |= j != i && edges[j].node == edges[i].node && edges[j].input_nr == edges[i].input_nr;
      if (b.defined() && !shared_slot && b.use_count() == 1 && b.impl().storage().use_count() == 1)
        acc.offered[i] = std::move(b);
    }
    return acc;
  };
  for (size_t i = 0; i < roots.size(); ++i) deliver(roots[i].node.get(), roots[i].input_nr, root_grads[i]);
  for (const Edge& e : roots)
    if (deps[e.node.get()] == 0) ready.push(e.node.get());
  std::unordered_set<Node*> queued;

  GradMode::set_enabled(create_graph);
  // Backward formulas run in the dtypes their forward chose, even inside an autocast region.
  amp::detail::ExcludeAutocastGuard no_autocast;
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    if (!queued.insert(n).second) continue;
    std::vector<Tensor> grads = std::move(tasks[n].buffer), row_sums = std::move(tasks[n].row_sums);
    tasks.erase(n);
    grads.resize(n->output_meta().size());
    n->run_pre_hooks(grads);
    if (auto it = captured_at.find(n); it != captured_at.end()) {
      for (auto [slot, index] : it->second) captured[index] = grads[slot];
    }
    bool leaf_sink = n->next_edges().empty();
    if (capture && leaf_sink) continue;  // autograd::grad leaves .grad alone
    bool any = false;
    for (size_t i = 0; i < grads.size(); ++i) {
      if (grads[i].defined()) {
        any = true;
      } else {
        const TensorMeta& m = n->output_meta()[i];
        grads[i] = zeros(m.sizes, TensorOptions(m.dtype).device(m.device));
      }
    }
    std::vector<Tensor> out;
    BackwardExtras acc = extras_for(*n, std::move(row_sums));
    if (any) {
      detail::OpRange range(detail::OpRangeKind::Backward, n->name().c_str(), grads);
      out = n->apply(std::move(grads), acc);
    }
    if (!keep_graph) n->release_saved();
    const auto& edges = n->next_edges();
    EMBER_CHECK(out.empty() || out.size() == edges.size(), "backward of ", n->name(), " returned ",
                out.size(), " gradients but the op has ", edges.size(), " inputs");
    // Offers not taken go back; a taken one left its slot empty for the sum that includes it.
    for (size_t i = 0; i < edges.size(); ++i) {
      if (acc.offered[i].defined() && !acc.taken[i])
        tasks[edges[i].node.get()].buffer[edges[i].input_nr] = std::move(acc.offered[i]);
      EMBER_CHECK(!acc.taken[i] || (i < out.size() && out[i].defined()), "backward of ", n->name(),
                  " took the gradient input ", i, " had received but returned none for it");
    }
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.valid()) continue;
      if (i < out.size() && out[i].defined()) {
        Tensor g = validate(*n, i, out[i], e.node->output_meta()[e.input_nr]);
        EMBER_CHECK(!anomaly_enabled || !has_nan(g), "anomaly detected: the backward of ", n->name(),
                    " returned NaN values in its gradient for input ", i);
        // Row sums of a gradient that validate cast, or that holds a taken one, are not its own.
        const bool own_sums = g.dtype() == out[i].dtype() && !acc.taken[i];
        deliver(e.node.get(), e.input_nr, g, own_sums ? std::move(acc.input_row_sums[i]) : Tensor());
      }
      if (--deps[e.node.get()] == 0) ready.push(e.node.get());
    }
  }
  return captured;
}

struct ModeRestore {
  bool grad = GradMode::is_enabled();
  std::vector<std::function<void()>>* outer = callbacks;
  std::vector<std::function<void()>> mine;
  ModeRestore() { callbacks = &mine; }
  ~ModeRestore() {
    GradMode::set_enabled(grad);
    callbacks = outer;
  }
};

std::vector<Tensor> run_with_roots(const std::vector<Tensor>& outputs,
                                   const std::vector<Tensor>& grad_outputs, bool retain_graph,
                                   bool create_graph, const std::vector<Edge>* capture) {
  EMBER_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), "backward: got ",
              grad_outputs.size(), " gradients for ", outputs.size(), " outputs");
  std::vector<Edge> roots;
  std::vector<Tensor> root_grads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    EMBER_CHECK(out.requires_grad(), "backward: element ", i,
                " of tensors does not require grad and does not have a grad_fn");
    Tensor g = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (!g.defined()) {
      EMBER_CHECK(out.numel() == 1,
                  "backward: grad can be implicitly created only for scalar outputs, got shape ",
                  out.sizes());
      g = ones_like(out);
    }
    EMBER_CHECK(g.sizes().equals(out.sizes()), "backward: gradient of shape ", g.sizes(),
                " does not match output ", i, " of shape ", out.sizes());
    roots.push_back(gradient_edge(out));
    root_grads.push_back(g);
  }
  ModeRestore restore;
  std::vector<Tensor> r = run(roots, root_grads, retain_graph || create_graph, create_graph, capture);
  for (auto& cb : restore.mine) cb();
  return r;
}

}  // namespace

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph, bool create_graph,
                         bool allow_unused) {
  std::vector<Edge> capture;
  for (size_t i = 0; i < inputs.size(); ++i) {
    EMBER_CHECK(inputs[i].requires_grad(), "grad: input ", i, " does not require grad");
    capture.push_back(gradient_edge(inputs[i]));
  }
  std::vector<Tensor> r = run_with_roots(outputs, grad_outputs, retain_graph, create_graph, &capture);
  for (size_t i = 0; i < r.size(); ++i) {
    EMBER_CHECK(r[i].defined() || allow_unused, "grad: input ", i,
                " appears not to have been used in the graph; set allow_unused=true if this is intended");
    if (r[i].defined() && !create_graph) r[i] = r[i].detach();
  }
  return r;
}

void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors, bool retain_graph,
              bool create_graph) {
  run_with_roots(tensors, grad_tensors, retain_graph, create_graph, nullptr);
}

void queue_callback(std::function<void()> callback) {
  EMBER_CHECK(callbacks, "queue_callback: only valid while a backward pass runs");
  callbacks->push_back(std::move(callback));
}

DetectAnomalyGuard::DetectAnomalyGuard() : prev_(anomaly_enabled) { anomaly_enabled = true; }
DetectAnomalyGuard::~DetectAnomalyGuard() { anomaly_enabled = prev_; }
bool is_anomaly_enabled() { return anomaly_enabled; }

}  // namespace ember::autograd

namespace ember {

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  autograd::backward({*this}, gradient.defined() ? std::vector<Tensor>{gradient} : std::vector<Tensor>{},
                     retain_graph, create_graph);
}

}  // namespace ember
