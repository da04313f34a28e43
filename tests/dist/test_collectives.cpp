// Every collective of the Gloo process group with 2 and 4 processes, each result checked
// against the same reduction computed locally from every rank's input; errors, timeouts and a
// peer that dies.
#include <thread>

#include "dist_test_util.h"
#include "ember/distributed/object_collectives.h"

namespace ember::testing::dist {
namespace {

namespace d = ember::distributed;
using d::ReduceOp;
using Clock = std::chrono::steady_clock;

const std::vector<ScalarType> kDtypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8};
const std::vector<ReduceOp> kOps = {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::PRODUCT, ReduceOp::MIN,
                                    ReduceOp::MAX};
const Tolerance kExact{0, 0};

// Rank r's input (`seed` tells apart several inputs of one rank): small integers, exact in
// every dtype, so that sums, products and averages over 4 ranks are exact too. PRODUCT gets 1s
// and 2s (products stay within uint8).
Tensor rank_input(int r, ScalarType dt, IntArrayRef shape, ReduceOp op = ReduceOp::SUM, int seed = 0) {
  Tensor t = empty(shape, kFloat64);
  double* p = t.data_ptr<double>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t k = i + 3 * r + 5 * seed;
    p[i] = dt == kBool ? k % 2 : op == ReduceOp::PRODUCT ? k % 2 + 1 : k % 7 + 1;
  }
  return t.to(dt);
}

// The reduction over ranks 0..size-1 of input(r), computed here in float64.
Tensor reduce_ref(const std::function<Tensor(int)>& input, int size, ReduceOp op) {
  Tensor acc = input(0).to(kFloat64);
  for (int r = 1; r < size; ++r) {
    Tensor x = input(r).to(kFloat64);
    acc = op == ReduceOp::PRODUCT ? acc * x
          : op == ReduceOp::MIN   ? minimum(acc, x)
          : op == ReduceOp::MAX   ? maximum(acc, x)
                                  : acc + x;
  }
  return op == ReduceOp::AVG ? acc / size : acc;
}

std::string label(const char* what, ScalarType dt, ReduceOp op = ReduceOp::SUM) {
  return ember::detail::str_cat(what, " ", dt, " ", d::to_string(op));
}

// --- Workers (one process per rank; RANK etc. come from run_workers) ---

DIST_WORKER(all_reduce) {
  d::init_process_group("gloo");
  int rank = d::get_rank(), size = d::get_world_size();
  for (ScalarType dt : kDtypes) {
    for (ReduceOp op : kOps) {
      if (op == ReduceOp::AVG && !is_floating_point(dt)) continue;
      Tensor t = rank_input(rank, dt, {3, 5}, op);
      d::all_reduce(t, op);
      auto ref = reduce_ref([&](int r) { return rank_input(r, dt, {3, 5}, op); }, size, op);
      check_close(t, ref.to(dt), label("all_reduce", dt, op), kExact);
    }
  }
  // Big enough for Gloo's ring to cut it into several segments per rank; a 0-dim tensor.
  Tensor big = full({1 << 20}, rank + 1.0);
  d::all_reduce(big);
  check_close(big, full({1 << 20}, size * (size + 1) / 2.0), "all_reduce of 1M floats", kExact);
  Tensor scalar = full({}, rank * 10.0, kFloat64);
  d::all_reduce(scalar, ReduceOp::MAX);
  check_close(scalar, full({}, (size - 1) * 10.0, kFloat64), "all_reduce of a 0-dim tensor", kExact);
  d::destroy_process_group();
}

DIST_WORKER(broadcast) {
  d::init_process_group("gloo");
  int rank = d::get_rank(), size = d::get_world_size();
  for (ScalarType dt : kDtypes) {
    for (int root = 0; root < size; ++root) {
      Tensor t = rank_input(rank, dt, {4, 3});
      d::broadcast(t, root);
      check_close(t, rank_input(root, dt, {4, 3}), label("broadcast", dt) + " root " + std::to_string(root),
                  kExact);
    }
  }
  Tensor b = rank_input(rank, kBool, {7});
  d::broadcast(b, size - 1);
  check_close(b, rank_input(size - 1, kBool, {7}), "broadcast bool", kExact);
  d::destroy_process_group();
}

DIST_WORKER(reduce) {
  d::init_process_group("gloo");
  int rank = d::get_rank(), size = d::get_world_size();
  int root = size - 1;
  for (ScalarType dt : kDtypes) {
    for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MAX, ReduceOp::AVG}) {
      if (op == ReduceOp::AVG && !is_floating_point(dt)) continue;
      Tensor t = rank_input(rank, dt, {2, 9}, op);
      d::reduce(t, root, op);
      if (rank != root) continue;  // only the root's result is defined
      auto ref = reduce_ref([&](int r) { return rank_input(r, dt, {2, 9}, op); }, size, op);
      check_close(t, ref.to(dt), label("reduce", dt, op), kExact);
    }
  }
  d::destroy_process_group();
}

DIST_WORKER(all_gather) {
  d::init_process_group("gloo");
  int rank = d::get_rank(), size = d::get_world_size();
  for (ScalarType dt : kDtypes) {
    std::vector<Tensor> outs;
    for (int r = 0; r < size; ++r) outs.push_back(full({2, 3}, -1.0, dt));
    d::all_gather(outs, rank_input(rank, dt, {2, 3}));
    for (int r = 0; r < size; ++r)
      check_close(outs[r], rank_input(r, dt, {2, 3}),
                  label("all_gather", dt) + " from rank " + std::to_string(r), kExact);
    Tensor flat = empty({size * 2, 3}, dt);
    d::all_gather_into_tensor(flat, rank_input(rank, dt, {2, 3}));
    std::vector<Tensor> expected;
    for (int r = 0; r < size; ++r) expected.push_back(rank_input(r, dt, {2, 3}));
    check_close(flat, cat(expected), label("all_gather_into_tensor", dt), kExact);
  }
  d::destroy_process_group();
}

DIST_WORKER(reduce_scatter) {
  d::init_process_group("gloo");
  int rank = d::get_rank(), size = d::get_world_size();
  for (ScalarType dt : kDtypes) {
    for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MIN, ReduceOp::AVG}) {
      if (op == ReduceOp::AVG && !is_floating_point(dt)) continue;
      // Tensor form: rank r's input has size * 2 rows; this rank gets the reduction of rows 2*rank, 2*rank+1.
      Tensor out = empty({2, 3}, dt);
      d::reduce_scatter_tensor(out, rank_input(rank, dt, {size * 2, 3}, op), op);
      auto ref = reduce_ref(
          [&](int r) {
            return rank_input(r, dt, {size * 2, 3}, op).narrow(0, 2 * rank, 2);
          },
          size, op);
      check_close(out, ref.to(dt), label("reduce_scatter_tensor", dt, op), kExact);
      // List form: inputs[j] of rank r is input(r, seed j).
      std::vector<Tensor> ins;
      for (int j = 0; j < size; ++j) ins.push_back(rank_input(rank, dt, {3}, op, j));
      Tensor out2 = empty({3}, dt);
      d::reduce_scatter(out2, ins, op);
      auto ref2 = reduce_ref([&](int r) { return rank_input(r, dt, {3}, op, rank); }, size, op);
      check_close(out2, ref2.to(dt), label("reduce_scatter", dt, op), kExact);
    }
  }
  d::destroy_process_group();
}

DIST_WORKER(all_to_all) {
  d::init_process_group("gloo");
  int rank = d::get_rank(), size = d::get_world_size();
  for (ScalarType dt : kDtypes) {
    // Equal splits: rank r sends rows 2j, 2j+1 of its input to rank j.
    Tensor out = empty({size * 2, 3}, dt);
    d::all_to_all_single(out, rank_input(rank, dt, {size * 2, 3}));
    std::vector<Tensor> expected;
    for (int j = 0; j < size; ++j)
      expected.push_back(rank_input(j, dt, {size * 2, 3}).narrow(0, 2 * rank, 2));
    check_close(out, cat(expected), label("all_to_all_single", dt), kExact);
    // Uneven splits: rank r sends j+1 rows to rank j (rows j(j+1)/2 ...), so receives rank+1 from each.
    int64_t rows = size * (size + 1) / 2;
    std::vector<int64_t> in_splits, out_splits(size, rank + 1);
    for (int j = 0; j < size; ++j) in_splits.push_back(j + 1);
    Tensor out2 = empty({size * (rank + 1), 2}, dt);
    d::all_to_all_single(out2, rank_input(rank, dt, {rows, 2}), out_splits, in_splits);
    expected.clear();
    for (int j = 0; j < size; ++j)
      expected.push_back(rank_input(j, dt, {rows, 2}).narrow(0, rank * (rank + 1) / 2, rank + 1));
    check_close(out2, cat(expected), label("all_to_all_single with splits", dt), kExact);
    // Lists: inputs[j] (shape [j+1, 2]) goes to rank j; outputs[j] (shape [rank+1, 2]) comes from j.
    std::vector<Tensor> ins, outs;
    for (int j = 0; j < size; ++j) {
      ins.push_back(rank_input(rank, dt, {j + 1, 2}, ReduceOp::SUM, j));
      outs.push_back(empty({rank + 1, 2}, dt));
    }
    d::all_to_all(outs, ins);
    for (int j = 0; j < size; ++j)
      check_close(outs[j], rank_input(j, dt, {rank + 1, 2}, ReduceOp::SUM, rank),
                  label("all_to_all", dt) + " from rank " + std::to_string(j), kExact);
  }
  d::destroy_process_group();
}

DIST_WORKER(send_recv) {
  d::init_process_group("gloo");
  int rank = d::get_rank(), size = d::get_world_size();
  int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  for (ScalarType dt : kDtypes) {
    Tensor got = empty({5}, dt);
    auto s = d::isend(rank_input(rank, dt, {5}), next);
    auto r = d::irecv(got, prev);
    r->wait();
    s->wait();
    check_close(got, rank_input(prev, dt, {5}), label("send/recv", dt), kExact);
  }
  // Tags match sends to receives, whatever the order they are posted in.
  if (rank == 0) {
    d::send(full({2}, 1.0), 1, nullptr, 7);
    d::send(full({2}, 2.0), 1, nullptr, 8);
  } else if (rank == 1) {
    Tensor a = empty({2}), b = empty({2});
    auto wb = d::irecv(b, 0, nullptr, 8);
    auto wa = d::irecv(a, 0, nullptr, 7);
    wb->wait();
    wa->wait();
    check_close(a, full({2}, 1.0), "recv tag 7", kExact);
    check_close(b, full({2}, 2.0), "recv tag 8", kExact);
  }
  d::destroy_process_group();
}

DIST_WORKER(barrier) {
  d::init_process_group("gloo");
  int rank = d::get_rank(), size = d::get_world_size();
  d::TCPStore store("127.0.0.1", env_int("MASTER_PORT"));
  std::this_thread::sleep_for(milliseconds(50 * rank));
  store.add("arrived", 1);
  d::barrier();
  // Nobody leaves the barrier before everybody arrived.
  int64_t arrived = store.add("arrived", 0);
  EMBER_CHECK(arrived >= size, "barrier: rank ", rank, " left it when only ", arrived, " of ", size,
              " had arrived");
  d::destroy_process_group();
}

DIST_WORKER(new_group) {
  d::init_process_group("gloo");
  int rank = d::get_rank(), size = d::get_world_size();
  // Even ranks, listed out of order (groups sort them, as PyTorch).
  std::vector<int> evens;
  for (int r = size - 1; r >= 0; --r)
    if (r % 2 == 0) evens.push_back(r);
  EMBER_CHECK(d::get_node_local_rank() == rank, "get_node_local_rank is ", d::get_node_local_rank());
  auto group = d::new_group(evens);
  auto whole = d::new_group();  // every rank: a second group beside the default one
  EMBER_CHECK((group != nullptr) == (rank % 2 == 0), "new_group: rank ", rank, " got ", group ? "a" : "no",
              " group");
  if (group) {
    EMBER_CHECK(d::get_rank(group) == rank / 2 && d::get_world_size(group) == (size + 1) / 2,
                "new_group: rank ", rank, " is ", d::get_rank(group), " of ", d::get_world_size(group));
    EMBER_CHECK(d::get_group_rank(group, rank) == rank / 2 && d::get_global_rank(group, rank / 2) == rank,
                "get_group_rank / get_global_rank");
    Tensor t = full({3}, double(rank));
    d::all_reduce(t, ReduceOp::SUM, group);
    double expected = 0;
    for (int r : evens) expected += r;
    check_close(t, full({3}, expected), "all_reduce in the group of even ranks", kExact);
    // src is a global rank.
    Tensor b = full({2}, double(rank));
    d::broadcast(b, evens.front(), group);
    check_close(b, full({2}, double(evens.front())), "broadcast in the group from global rank", kExact);
    EMBER_CHECK(d::get_backend(group) == "gloo", "get_backend");
  }
  Tensor w = full({1}, 1.0);
  d::all_reduce(w, ReduceOp::SUM, whole);
  check_close(w, full({1}, double(size)), "all_reduce in new_group()", kExact);
  if (group) d::destroy_process_group(group);  // (null would mean every group)
  d::destroy_process_group();
  EMBER_CHECK(!d::is_initialized(), "destroy_process_group left it initialized");
}

DIST_WORKER(async_ops) {
  d::init_process_group("gloo");
  int rank = d::get_rank(), size = d::get_world_size();
  std::vector<Tensor> ts;
  std::vector<std::shared_ptr<d::Work>> works;
  for (int i = 0; i < 4; ++i) {
    ts.push_back(full({1000}, double(rank + i)));
    works.push_back(d::all_reduce(ts.back(), ReduceOp::SUM, nullptr, /*async_op=*/true));
  }
  works.push_back(d::default_group()->barrier());
  for (int i = 4; i >= 0; --i) EMBER_CHECK(works[i]->wait(), "wait");
  for (int i = 0; i < 4; ++i) {
    EMBER_CHECK(works[i]->is_completed() && works[i]->is_success() && !works[i]->exception(), "work state");
    check_close(ts[i], full({1000}, double(size * (size - 1) / 2 + size * i)), "async all_reduce", kExact);
  }
  d::destroy_process_group();
}

// Rank 1 never joins the all-reduce: rank 0's times out after the group's timeout.
DIST_WORKER(collective_timeout) {
  d::InitOptions o;
  o.timeout = milliseconds(500);
  d::init_process_group("gloo", o);
  if (d::get_rank() == 1) {
    std::this_thread::sleep_for(milliseconds(1500));
    return;
  }
  Tensor t = ones({4});
  auto work = d::all_reduce(t, ReduceOp::SUM, nullptr, true);
  auto start = Clock::now();
  bool threw = false;
  try {
    work->wait(milliseconds(50));
  } catch (const Error& e) {
    threw =
        std::string(e.what()).find(
            "ProcessGroupGloo: all_reduce #1 (rank 0 of 2) did not finish within 50 ms") != std::string::npos;
    EMBER_CHECK(threw, "unexpected message: ", e.what());
  }
  EMBER_CHECK(threw, "wait(50 ms) did not time out");
  try {
    work->wait();
    EMBER_CHECK(false, "the all_reduce did not time out");
  } catch (const Error& e) {
    std::string msg = e.what();
    EMBER_CHECK(msg.find("ProcessGroupGloo: all_reduce #1 (rank 0 of 2) failed") != std::string::npos &&
                    msg.find("imed out") != std::string::npos,
                "unexpected message: ", msg);
  }
  auto ms = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  EMBER_CHECK(ms < 1400, "the timeout took ", ms, " ms");
  EMBER_CHECK(work->is_completed() && !work->is_success() && work->exception(),
              "work state after the failure");
}

// Rank 1 dies after joining: rank 0's next collective fails instead of hanging.
DIST_WORKER(peer_dies) {
  d::init_process_group("gloo");
  if (d::get_rank() == 1) std::_Exit(0);
  std::this_thread::sleep_for(milliseconds(200));
  auto start = Clock::now();
  Tensor t = ones({4});
  try {
    d::all_reduce(t);
    EMBER_CHECK(false, "all_reduce with a dead peer succeeded");
  } catch (const Error& e) {
    EMBER_CHECK(std::string(e.what()).find("ProcessGroupGloo: all_reduce #1 (rank 0 of 2) failed") !=
                    std::string::npos,
                "unexpected message: ", e.what());
  }
  auto ms = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  EMBER_CHECK(ms < 5000, "noticing the dead peer took ", ms, " ms");
}

// Byte strings of different lengths (an empty one, one with NULs), gathered and broadcast on the
// default group and within a group of some ranks.
DIST_WORKER(object_collectives) {
  d::init_process_group("gloo");
  const int rank = d::get_rank(), size = d::get_world_size();
  auto object_of = [](int r) {
    return r == 1 ? std::string()
                  : "rank " + std::to_string(r) + std::string(static_cast<size_t>(r), '\0') + "!";
  };
  std::vector<std::string> gathered{"stale"};
  d::all_gather_object(gathered, object_of(rank));
  EMBER_CHECK(gathered.size() == static_cast<size_t>(size), "all_gather_object: ", gathered.size(),
              " objects");
  for (int r = 0; r < size; ++r)
    EMBER_CHECK(gathered[r] == object_of(r), "all_gather_object: rank ", rank, " got \"", gathered[r],
                "\" for rank ", r);
  const std::vector<std::string> sent{R"({"lr": 0.1})", "", std::string(10000, 'x')};
  std::vector<std::string> list = rank == size - 1 ? sent : std::vector<std::string>{"other"};
  d::broadcast_object_list(list, size - 1);
  EMBER_CHECK(list == sent, "broadcast_object_list: rank ", rank, " got ", list.size(), " objects");
  std::vector<std::string> none = rank == 0 ? std::vector<std::string>{} : std::vector<std::string>{"x"};
  d::broadcast_object_list(none, 0);
  EMBER_CHECK(none.empty(), "broadcast_object_list of an empty list left ", none.size(), " objects");
  std::vector<int> odds;
  for (int r = 1; r < size; r += 2) odds.push_back(r);
  if (auto group = d::new_group(odds)) {
    std::vector<std::string> in_group;
    d::all_gather_object(in_group, object_of(rank), group);
    for (size_t i = 0; i < odds.size(); ++i)
      EMBER_CHECK(in_group.at(i) == object_of(odds[i]), "all_gather_object in a group: rank ", rank);
    std::vector<std::string> from_one =
        rank == 1 ? std::vector<std::string>{"from 1"} : std::vector<std::string>{};
    d::broadcast_object_list(from_one, 1, group);
    EMBER_CHECK(from_one == std::vector<std::string>{"from 1"}, "broadcast_object_list in a group: rank ",
                rank);
    d::destroy_process_group(group);
  }
  d::destroy_process_group();
}

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, AllReduce) { run_workers("all_reduce", GetParam()); }
TEST_P(Collectives, Broadcast) { run_workers("broadcast", GetParam()); }
TEST_P(Collectives, Reduce) { run_workers("reduce", GetParam()); }
TEST_P(Collectives, AllGather) { run_workers("all_gather", GetParam()); }
TEST_P(Collectives, ReduceScatter) { run_workers("reduce_scatter", GetParam()); }
TEST_P(Collectives, AllToAll) { run_workers("all_to_all", GetParam()); }
TEST_P(Collectives, SendRecv) { run_workers("send_recv", GetParam()); }
TEST_P(Collectives, Barrier) { run_workers("barrier", GetParam()); }
TEST_P(Collectives, NewGroup) { run_workers("new_group", GetParam()); }
TEST_P(Collectives, AsyncOps) { run_workers("async_ops", GetParam()); }
TEST_P(Collectives, ObjectCollectives) { run_workers("object_collectives", GetParam()); }
INSTANTIATE_TEST_SUITE_P(Gloo, Collectives, ::testing::Values(2, 4),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

TEST(CollectiveFailures, TimeoutFailsTheWork) { run_workers("collective_timeout", 2); }
TEST(CollectiveFailures, DeadPeerFailsTheNextCollective) { run_workers("peer_dies", 2); }

// A collective writes into its output like an in-place op: the output's version moves (a
// broadcast's root and a reduce's other ranks keep theirs), so autograd refuses a backward through
// a value that a collective changed after it was saved.
DIST_WORKER(collectives_move_versions) {
  d::init_process_group("gloo");
  int rank = d::get_rank(), size = d::get_world_size();
  auto moves = [](const Tensor& t, const std::function<void()>& collective) {
    const uint32_t before = t._version();
    collective();
    return t._version() > before;
  };
  auto expect = [](bool moved, bool want, const char* what) {
    EMBER_CHECK(moved == want, what, ": version ", moved ? "moved" : "kept", ", expected it ",
                want ? "to move" : "kept");
  };
  Tensor t = ones({4});
  expect(moves(t, [&] { d::all_reduce(t); }), true, "all_reduce");
  expect(moves(t, [&] { d::broadcast(t, 0); }), rank != 0, "broadcast");
  expect(moves(t, [&] { d::reduce(t, 0); }), rank == 0, "reduce");
  Tensor gathered = empty({4 * size});
  expect(moves(gathered, [&] { d::all_gather_into_tensor(gathered, t); }), true, "all_gather_into_tensor");
  Tensor part = empty({4});
  expect(moves(part, [&] { d::reduce_scatter_tensor(part, gathered); }), true, "reduce_scatter_tensor");
  Tensor swapped = empty({4 * size});
  expect(moves(swapped, [&] { d::all_to_all_single(swapped, gathered); }), true, "all_to_all_single");
  Tensor got = empty({4});
  expect(moves(got,
               [&] {
                 auto s = d::isend(t, (rank + 1) % size);
                 d::recv(got, (rank + size - 1) % size);
                 s->wait();
               }),
         true, "recv");
  // A saved tensor that an all_reduce changed fails the backward instead of giving a wrong gradient.
  Tensor w = ones({4}).requires_grad_();
  Tensor x = ones({4});
  Tensor loss = (w * x).sum();  // saves x for w's gradient
  d::all_reduce(x);
  bool refused = false;
  try {
    loss.backward();
  } catch (const Error& e) {
    refused = std::string(e.what()).find("modified by an inplace operation") != std::string::npos;
  }
  EMBER_CHECK(refused, "backward through a tensor changed by all_reduce was not refused");
  d::destroy_process_group();
}

TEST(CollectiveVersions, CollectivesMoveTheVersionsOfWhatTheyWrite) {
  run_workers("collectives_move_versions", 2);
}

// --- In one process: a group of one, and the argument checks ---

std::shared_ptr<d::ProcessGroup> single_group(std::shared_ptr<d::Store>& store) {
  store = std::make_shared<d::TCPStore>("127.0.0.1", 0, std::nullopt, true, milliseconds(5000));
  return d::make_process_group_gloo(std::make_shared<d::PrefixStore>("g", store), 0, 1);
}

TEST(ProcessGroupGloo, WorldOfOne) {
  std::shared_ptr<d::Store> store;
  auto pg = single_group(store);
  EXPECT_EQ(pg->rank(), 0);
  EXPECT_EQ(pg->size(), 1);
  EXPECT_EQ(pg->backend_name(), "gloo");
  EXPECT_EQ(pg->options().timeout, d::ProcessGroup::kDefaultTimeout);
  Tensor t = tensor({1.0, 2.0, 3.0});
  pg->all_reduce(t, ReduceOp::AVG)->wait();
  EXPECT_CLOSE(t, tensor({1.0, 2.0, 3.0}));
  std::vector<Tensor> outs = {zeros({3})};
  pg->all_gather(outs, t)->wait();
  EXPECT_CLOSE(outs[0], t);
  Tensor e = empty({0});
  pg->all_reduce(e)->wait();
  pg->barrier()->wait();
}

TEST(ProcessGroupGloo, ArgumentErrors) {
  std::shared_ptr<d::Store> store;
  auto pg = single_group(store);
  Tensor t = zeros({4, 4});
  EXPECT_EMBER_ERROR(pg->all_reduce(t.t().slice(0, 0, 4, 2)), "all_reduce: tensor must be contiguous",
                     "strides");
  EXPECT_EMBER_ERROR(pg->all_reduce(Tensor()), "all_reduce: tensor is undefined");
  EXPECT_EMBER_ERROR(pg->all_reduce(zeros({2}, kInt64), ReduceOp::AVG),
                     "all_reduce: ReduceOp AVG needs a floating-point tensor, got int64");
  EXPECT_EMBER_ERROR(pg->all_reduce(zeros({2}, kBool)), "all_reduce: cannot reduce a bool tensor (SUM)");
  EXPECT_EMBER_ERROR(pg->broadcast(t, 1), "broadcast: root 1 is not a rank of the group (size 1)");
  EXPECT_EMBER_ERROR(pg->reduce(t, -1), "reduce: root -1 is not a rank of the group");
  std::vector<Tensor> two = {zeros({4, 4}), zeros({4, 4})};
  EXPECT_EMBER_ERROR(pg->all_gather(two, t), "all_gather: got 2 output tensors for a group of size 1");
  std::vector<Tensor> wrong_shape = {zeros({4})};
  EXPECT_EMBER_ERROR(pg->all_gather(wrong_shape, t),
                     "all_gather: outputs[0] has shape [4], input has [4, 4]");
  std::vector<Tensor> wrong_dtype = {zeros({4, 4}, kFloat64)};
  EXPECT_EMBER_ERROR(pg->all_gather(wrong_dtype, t), "all_gather: outputs[0] is float64", "expected float32");
  EXPECT_EMBER_ERROR(pg->all_gather_into_tensor(zeros({5}), zeros({4})),
                     "all_gather_into_tensor: output has 5 elements (shape [5]), expected 1 x 4");
  EXPECT_EMBER_ERROR(pg->reduce_scatter_tensor(zeros({2}), zeros({3})),
                     "reduce_scatter_tensor: input has 3 elements (shape [3]), expected 1 x 2");
  EXPECT_EMBER_ERROR(pg->reduce_scatter(zeros({2}), {}),
                     "reduce_scatter: got 0 input tensors for a group of size 1");
  EXPECT_EMBER_ERROR(pg->all_to_all_single(zeros({4}), zeros({4}), {1, 2}),
                     "all_to_all_single: output_split_sizes has 2 entries for a group of size 1");
  EXPECT_EMBER_ERROR(pg->all_to_all_single(zeros({4}), zeros({4}), {}, {3}),
                     "all_to_all_single: input_split_sizes add up to 3 rows, but input has 4");
  EXPECT_EMBER_ERROR(pg->all_to_all({}, {zeros({1})}),
                     "all_to_all: got 0 outputs and 1 inputs for a group of size 1");
  EXPECT_EMBER_ERROR(pg->send(t, 0), "send: rank 0 cannot send to itself");
  EXPECT_EMBER_ERROR(pg->recv(t, 3), "recv: src 3 is not a rank of the group");
  EXPECT_EMBER_ERROR(d::make_process_group_gloo(nullptr, 0, 1), "ProcessGroupGloo: the store is null");
  EXPECT_EMBER_ERROR(d::make_process_group_gloo(store, 2, 2), "ProcessGroup: rank 2 is not in [0, 2)");
  d::ProcessGroupGlooOptions o;
  o.timeout = milliseconds(0);
  EXPECT_EMBER_ERROR(d::make_process_group_gloo(store, 0, 1, o),
                     "ProcessGroup: timeout must be positive, got 0 ms");
}

// Environment variables set for one test and restored after it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    if (old) old_ = old;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(InitProcessGroup, ErrorsAndWorldOfOne) {
  ScopedEnv rank("RANK", nullptr), ws("WORLD_SIZE", "1"), agent("EMBER_USE_AGENT_STORE", nullptr),
      local("LOCAL_RANK", nullptr);
  EXPECT_FALSE(d::is_initialized());
  EXPECT_EMBER_ERROR(d::get_rank(), "get_rank: the default process group is not initialized");
  EXPECT_EMBER_ERROR(d::get_node_local_rank(), "get_node_local_rank: LOCAL_RANK is not set", "fallback_rank");
  EXPECT_EQ(d::get_node_local_rank(3), 3);
  {
    ScopedEnv set("LOCAL_RANK", "1");  // before any group, as a program picking its GPU reads it
    EXPECT_EQ(d::get_node_local_rank(3), 1);
  }
  EXPECT_EMBER_ERROR(d::all_reduce(zeros({1})), "all_reduce: the default process group is not initialized");
  EXPECT_EMBER_ERROR(d::init_process_group("mpi"), "init_process_group: unknown backend 'mpi'");
  EXPECT_EMBER_ERROR(d::init_process_group("gloo"),
                     "init_process_group: rank is not given and RANK is not set");
  {
    ScopedEnv bad("RANK", "x1");
    EXPECT_EMBER_ERROR(d::init_process_group("gloo"),
                       "init_process_group: RANK='x1' is not a non-negative integer");
  }
  {  // RANK >= WORLD_SIZE, and no MASTER_ADDR: clear errors before any connection is tried
    ScopedEnv r("RANK", "3"), w("WORLD_SIZE", "2");
    EXPECT_EMBER_ERROR(d::init_process_group("gloo"), "init_process_group: rank 3 is not in [0, 2)");
  }
  {
    ScopedEnv r("RANK", "0"), a("MASTER_ADDR", nullptr);
    EXPECT_EMBER_ERROR(d::init_process_group("gloo"), "init_process_group: master_addr is not given",
                       "MASTER_ADDR is not set");
  }
  d::InitOptions o;
  o.rank = 0;
  o.master_addr = "127.0.0.1";
  o.master_port = free_port();
  d::init_process_group("gloo", o);
  EXPECT_TRUE(d::is_initialized());
  EXPECT_EQ(d::get_rank(), 0);
  EXPECT_EQ(d::get_world_size(), 1);
  EXPECT_EQ(d::get_backend(), "gloo");
  EXPECT_EQ(d::get_node_local_rank(), 0);
  EXPECT_EMBER_ERROR(d::init_process_group("gloo", o), "init_process_group: already initialized");
  Tensor t = tensor({3.0, 4.0});
  d::all_reduce(t);
  EXPECT_CLOSE(t, tensor({3.0, 4.0}));
  EXPECT_EMBER_ERROR(d::broadcast(t, 1), "get_group_rank: global rank 1 is not in the group (ranks [0])");
  EXPECT_EMBER_ERROR(d::new_group({0, 0}), "new_group: rank 0 is listed twice");
  EXPECT_EMBER_ERROR(d::new_group({5}), "new_group: rank 5 is not in [0, 1)");
  d::barrier();
  d::destroy_process_group();
  EXPECT_FALSE(d::is_initialized());
  EXPECT_EMBER_ERROR(d::destroy_process_group(),
                     "destroy_process_group: the default process group is not initialized");
}

TEST(InitProcessGroup, NcclWithoutACudaTensor) {
  d::InitOptions o;
  o.rank = 0;
  o.world_size = 1;
  o.master_addr = "127.0.0.1";
  o.master_port = free_port();
  if (!d::is_nccl_available()) {
    EXPECT_EMBER_ERROR(d::init_process_group("nccl", o), "ProcessGroupNCCL: ember was built without NCCL");
    return;
  }
  d::init_process_group("nccl", o);
  EXPECT_EQ(d::get_backend(), "nccl");
  EXPECT_EMBER_ERROR(d::all_reduce(zeros({2})), "ProcessGroupNCCL: all_reduce: NCCL takes CUDA tensors");
  d::destroy_process_group();
}

TEST(ProcessGroupGloo, AvailableInThisBuild) {
  // CI installs libgloo-dev (scripts/install_deps.sh): the Gloo backend must be there.
  EXPECT_TRUE(d::is_gloo_available());
}

}  // namespace
}  // namespace ember::testing::dist
