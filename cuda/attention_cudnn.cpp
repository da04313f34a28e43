// scaled_dot_product_attention through cudnn_frontend's SDPA graphs. One graph per problem
// (shapes, strides, dtype, mask shape, causal, dropout) and direction, built once per thread
// (cuDNN's plans are not safe to share between threads) and kept, also when cuDNN declined it,
// so a declined problem is asked once. The forward for training builds the backward graph too:
// the fused path is taken only when both run, since the backward cannot fall back without the
// forward's dropout mask.
#include "ember/cuda/attention_cudnn.h"

#include <atomic>

namespace ember::cuda {
namespace {
std::atomic<bool> g_enabled{true};
thread_local std::string t_last_rejection;
}  // namespace

void enable_cudnn_sdp(bool enabled) { g_enabled.store(enabled, std::memory_order_relaxed); }
bool cudnn_sdp_enabled() { return g_enabled.load(std::memory_order_relaxed); }
std::string cudnn_sdp_last_rejection() { return t_last_rejection; }

}  // namespace ember::cuda

#if !__has_include(<cudnn_frontend.h>)

namespace ember::cuda {
bool cudnn_sdp_available() { return false; }
std::optional<SdpaFused> cudnn_attention_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                                 bool, double, double, PhiloxState, bool) {
  return std::nullopt;
}
}  // namespace ember::cuda

#else

#include <cudnn_frontend.h>

#include <bit>
#include <cstring>
#include <limits>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ember/core/deterministic.h"
#include "ember/core/factories.h"
#include "ember/core/memory_format.h"
#include "ember/core/ops/attention.h"
#include "ember/cuda/attention_layout.h"
#include "ember/cuda/cudnn_handle.h"
#include "ember/cuda/handle_pool.h"
#include "ember/cuda/philox_tensor.h"

namespace ember::cuda {

bool cudnn_sdp_available() { return true; }

namespace {

namespace fe = cudnn_frontend;
using Graph = fe::graph::Graph;
using TensorAttr = std::shared_ptr<fe::graph::Tensor_attributes>;

constexpr const char* kOp = "scaled_dot_product_attention";

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kBias, kSeed, kOffset, kGradO, kGradQ, kGradK, kGradV };

// What decides a graph. Strides of the outputs follow from the inputs' (laid out alike).
struct Problem {
  int64_t device, dtype, b, h, l, s, e, ev;
  int64_t q_strides[4], k_strides[4], v_strides[4], bias_sizes[4], bias_strides[4];
  int64_t causal, scale_bits, dropout_bits, training, backward, packed, deterministic;

  bool operator==(const Problem& o) const { return std::memcmp(this, &o, sizeof(Problem)) == 0; }
};

struct ProblemHash {
  size_t operator()(const Problem& p) const {
    const auto* words = reinterpret_cast<const int64_t*>(&p);
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the numbers
    for (size_t i = 0; i < sizeof(Problem) / sizeof(int64_t); ++i)
      h = (h ^ static_cast<uint64_t>(words[i])) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

struct Built {
  std::shared_ptr<Graph> graph;
  std::string rejection;  // why cuDNN declined the problem; empty when the graph runs
  int64_t workspace = 0;
  bool ok() const { return rejection.empty(); }
};

std::vector<int64_t> vec(IntArrayRef a) { return {a.begin(), a.end()}; }

TensorAttr operand(Graph& g, Uid uid, const char* name, IntArrayRef sizes, IntArrayRef strides) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_uid(uid)
                      .set_name(name)
                      .set_dim(vec(sizes))
                      .set_stride(vec(strides)));
}

TensorAttr scalar(Graph& g, Uid uid, const char* name) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_uid(uid)
                      .set_name(name)
                      .set_dim({1, 1, 1, 1})
                      .set_stride({1, 1, 1, 1})
                      .set_data_type(fe::DataType_t::INT64));
}

// The operands' layouts of one problem, as both graphs declare them.
struct Layouts {
  Tensor q, k, v, out, stats, bias;
  bool packed = false;  // the backward writes dq, dk, dv into one buffer laid out as q, k, v
};

void finish(Graph& g, Built& built) {
  cudnnHandle_t handle = cudnn_handle();
  fe::error_t st = g.validate();
  if (st.is_good()) st = g.build_operation_graph(handle);
  if (st.is_good()) st = g.create_execution_plans({fe::HeurMode_t::A});
  if (st.is_good()) st = g.check_support(handle);
  if (st.is_good()) st = g.build_plans(handle);
  if (st.is_good()) st = g.get_workspace_size(built.workspace);
  if (st.is_bad()) built.rejection = st.get_message().empty() ? "declined" : st.get_message();
}

void set_io_types(Graph& g, ScalarType dt) {
  g.set_io_data_type(dt == kBFloat16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
}

template <class Attributes>
void set_options(Graph& g, Attributes& a, const Layouts& t, bool causal, double scale, double dropout_p) {
  a.set_causal_mask(causal).set_attn_scale(static_cast<float>(scale));
  if (t.bias.defined()) a.set_bias(operand(g, kBias, "bias", t.bias.sizes(), t.bias.strides()));
  if (dropout_p > 0)
    a.set_dropout(static_cast<float>(dropout_p), scalar(g, kSeed, "seed"), scalar(g, kOffset, "offset"));
}

Built build_forward(const Layouts& t, bool causal, double scale, double dropout_p, bool training) {
  Built built;
  built.graph = std::make_shared<Graph>();
  Graph& g = *built.graph;
  set_io_types(g, t.q.dtype());
  auto attrs = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(training);
  set_options(g, attrs, t, causal, scale, dropout_p);
  auto [o, stats] =
      g.sdpa(operand(g, kQ, "q", t.q.sizes(), t.q.strides()), operand(g, kK, "k", t.k.sizes(), t.k.strides()),
             operand(g, kV, "v", t.v.sizes(), t.v.strides()), attrs);
  o->set_uid(kO).set_output(true).set_dim(vec(t.out.sizes())).set_stride(vec(t.out.strides()));
  if (training)
    stats->set_uid(kStats)
        .set_output(true)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim(vec(t.stats.sizes()))
        .set_stride(vec(t.stats.strides()));
  finish(g, built);
  return built;
}

// The output's gradient is laid out as out; dq, dk, dv as q, k, v (dense in their dims' order,
// or, packed, with their very strides). `deterministic` asks for the query gradient summed in a
// fixed order (on Hopper, through a workspace of b * h * l * s bf16 scores).
Built build_backward(const Layouts& t, bool causal, double scale, double dropout_p, bool deterministic) {
  Built built;
  built.graph = std::make_shared<Graph>();
  Graph& g = *built.graph;
  set_io_types(g, t.q.dtype());
  auto attrs = fe::graph::SDPA_backward_attributes()
                   .set_name("sdpa_backward")
                   .set_deterministic_algorithm(deterministic);
  set_options(g, attrs, t, causal, scale, dropout_p);
  auto stats = g.tensor(fe::graph::Tensor_attributes()
                            .set_uid(kStats)
                            .set_name("stats")
                            .set_dim(vec(t.stats.sizes()))
                            .set_stride(vec(t.stats.strides()))
                            .set_data_type(fe::DataType_t::FLOAT));
  auto [dq, dk, dv] = g.sdpa_backward(
      operand(g, kQ, "q", t.q.sizes(), t.q.strides()), operand(g, kK, "k", t.k.sizes(), t.k.strides()),
      operand(g, kV, "v", t.v.sizes(), t.v.strides()), operand(g, kO, "o", t.out.sizes(), t.out.strides()),
      operand(g, kGradO, "do", t.out.sizes(), t.out.strides()), stats, attrs);
  const std::pair<TensorAttr, const Tensor*> grads[] = {{dq, &t.q}, {dk, &t.k}, {dv, &t.v}};
  const Uid uids[] = {kGradQ, kGradK, kGradV};
  for (int i = 0; i < 3; ++i) {
    const IntArrayRef sizes = grads[i].second->sizes();
    grads[i]
        .first->set_uid(uids[i])
        .set_output(true)
        .set_dim(vec(sizes))
        .set_stride(t.packed ? vec(grads[i].second->strides())
                             : vec(dense_strides_like(sizes, {grads[i].second->strides()})));
  }
  finish(g, built);
  return built;
}

Problem problem(const Layouts& t, bool causal, double scale, double dropout_p, bool training, bool backward) {
  Problem p{};
  p.device = t.q.device().index;
  p.dtype = static_cast<int64_t>(t.q.dtype());
  p.b = t.q.size(0), p.h = t.q.size(1), p.l = t.q.size(2), p.s = t.k.size(2), p.e = t.q.size(3),
  p.ev = t.v.size(3);
  for (int d = 0; d < 4; ++d) {
    p.q_strides[d] = t.q.stride(d), p.k_strides[d] = t.k.stride(d), p.v_strides[d] = t.v.stride(d);
    p.bias_sizes[d] = t.bias.defined() ? t.bias.size(d) : 0;
    p.bias_strides[d] = t.bias.defined() ? t.bias.stride(d) : 0;
  }
  p.causal = causal;
  p.scale_bits = std::bit_cast<int64_t>(scale);
  p.dropout_bits = std::bit_cast<int64_t>(dropout_p);
  p.training = training;
  p.backward = backward;
  p.packed = backward && t.packed;
  p.deterministic = backward && are_deterministic_algorithms_enabled();
  return p;
}

// The graph of a problem, built on first use by this thread.
const Built& graph_for(const Layouts& t, bool causal, double scale, double dropout_p, bool training,
                       bool backward) {
  thread_local std::unordered_map<Problem, Built, ProblemHash> cache;
  const Problem key = problem(t, causal, scale, dropout_p, training, backward);
  auto it = cache.find(key);
  if (it == cache.end()) {
    Built b = backward ? build_backward(t, causal, scale, dropout_p, key.deterministic)
                       : build_forward(t, causal, scale, dropout_p, training);
    it = cache.emplace(key, std::move(b)).first;
  }
  if (!it->second.ok()) t_last_rejection = it->second.rejection;
  return it->second;
}

void execute(const Built& built, std::unordered_map<int64_t, void*>& pack, Device device) {
  Tensor ws = built.workspace > 0 ? empty({built.workspace}, TensorOptions(kUInt8).device(device)) : Tensor();
  fe::error_t st = built.graph->execute(cudnn_handle(), pack, ws.defined() ? ws.data_ptr() : nullptr);
  EMBER_CHECK(st.is_good(), kOp, ": cuDNN's fused attention failed to run: ", st.get_message(), " (",
              __FILE__, ":", __LINE__, ")");
}

// The backward graph of a forward's layouts: packed gradients when q, k, v allow and cuDNN
// takes them, else dense ones; t.packed says which.
const Built& backward_graph(Layouts& t, bool causal, double scale, double dropout_p) {
  t.packed = qkv_packed(t.q, t.k, t.v);
  if (t.packed) {
    const Built& packed = graph_for(t, causal, scale, dropout_p, true, true);
    if (packed.ok()) return packed;
    t.packed = false;
  }
  return graph_for(t, causal, scale, dropout_p, true, true);
}

// The mask as cuDNN adds it: in the inputs' dtype, 4-D, dense but for a query dim it broadcasts
// (stride 0: cuDNN reads a size-1 query dim's stride as a real one); a boolean mask becomes 0
// where it attends and -inf elsewhere.
Tensor bias_from(const Tensor& mask, ScalarType dt, int64_t L) {
  Tensor m = mask;
  while (m.dim() < 4) m = m.unsqueeze(0);
  Tensor b = m.dtype() == kBool ? zeros(m.sizes(), TensorOptions(dt).device(m.device()))
                                      .masked_fill(!m, -std::numeric_limits<double>::infinity())
                                : m.to(dt).contiguous();
  return b.expand({b.size(0), b.size(1), L, b.size(3)});
}

// cuDNN's offset counts Philox numbers per thread: ember's per-op offsets are spread 2^32 apart so
// that no two draws share numbers.
constexpr int kCudnnOffsetShift = 32;

std::array<Tensor, 3> cudnn_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k,
                                               const Tensor& v, const SdpaFused& fwd, bool is_causal,
                                               double scale, double dropout_p) {
  detail::check_on_current_device(kOp, q.device());
  // The output's gradient in the output's layout, as the graph declares it.
  Tensor go = grad_out;
  if (go.strides() != fwd.out.strides() || !rows_aligned(go))
    go = empty_strided(fwd.out.sizes(), fwd.out.strides(), fwd.out.options()).copy_(grad_out);
  Layouts t{q, k, v, fwd.out, fwd.stats, fwd.bias};
  const Built& bwd = backward_graph(t, is_causal, scale, dropout_p);
  EMBER_CHECK(bwd.ok(), kOp, ": cuDNN declined the backward its forward ran: ", bwd.rejection);
  std::array<Tensor, 3> grads = empty_qkv_grads(q, k, v, t.packed);
  std::unordered_map<int64_t, void*> pack = {{kQ, q.data_ptr()},
                                             {kK, k.data_ptr()},
                                             {kV, v.data_ptr()},
                                             {kO, fwd.out.data_ptr()},
                                             {kGradO, go.data_ptr()},
                                             {kStats, fwd.stats.data_ptr()},
                                             {kGradQ, grads[0].data_ptr()},
                                             {kGradK, grads[1].data_ptr()},
                                             {kGradV, grads[2].data_ptr()}};
  if (fwd.bias.defined()) pack[kBias] = fwd.bias.data_ptr();
  if (fwd.rng.defined()) pack[kSeed] = fwd.rng.data_ptr(), pack[kOffset] = fwd.rng.data_ptr<int64_t>() + 1;
  execute(bwd, pack, q.device());
  return grads;
}

}  // namespace

std::optional<SdpaFused> cudnn_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                                 const Tensor& mask, bool is_causal, double scale,
                                                 double dropout_p, PhiloxState rng, bool training) {
  const ScalarType dt = q.dtype();
  if (!cudnn_sdp_enabled() || (dt != kFloat16 && dt != kBFloat16) || dropout_p >= 1) return std::nullopt;
  const int64_t B = q.size(0), H = q.size(1), L = q.size(2), E = q.size(3), S = k.size(2), Ev = v.size(3);
  if (k.size(0) != B || v.size(0) != B || k.size(1) != H || v.size(1) != H || L == 0 || S == 0 ||
      E % 8 != 0 || Ev % 8 != 0 || !rows_aligned(q) || !rows_aligned(k) || !rows_aligned(v))
    return std::nullopt;
  detail::check_on_current_device(kOp, q.device());

  Layouts t{q, k, v, empty_like_dense({B, H, L, Ev}, q, dt), Tensor(), Tensor()};
  if (training) t.stats = empty({B, H, L, 1}, TensorOptions(kFloat32).device(q.device()));
  if (mask.defined()) t.bias = bias_from(mask, dt, L);
  const Built& fwd = graph_for(t, is_causal, scale, dropout_p, training, false);
  if (!fwd.ok() || (training && !backward_graph(t, is_causal, scale, dropout_p).ok())) return std::nullopt;

  SdpaFused f{t.out,
              t.stats,
              t.bias,
              dropout_p > 0 ? philox_tensor(rng, q.device(), kCudnnOffsetShift) : Tensor(),
              "_scaled_dot_product_cudnn_attention",
              &cudnn_attention_backward};
  std::unordered_map<int64_t, void*> pack = {
      {kQ, q.data_ptr()}, {kK, k.data_ptr()}, {kV, v.data_ptr()}, {kO, f.out.data_ptr()}};
  if (training) pack[kStats] = f.stats.data_ptr();
  if (f.bias.defined()) pack[kBias] = f.bias.data_ptr();
  if (f.rng.defined()) pack[kSeed] = f.rng.data_ptr(), pack[kOffset] = f.rng.data_ptr<int64_t>() + 1;
  execute(fwd, pack, q.device());
  return f;
}

}  // namespace ember::cuda

#endif
