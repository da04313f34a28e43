// ProcessGroupNCCL with one rank on one GPU: every collective and dtype, ordering against the
// current stream, init_process_group("nccl"). (Several ranks need several GPUs: see the dist
// suite for the same checks over Gloo.)
#include <ember/distributed/distributed.h>

#include <thread>

#include "cuda_test_util.h"

namespace ember::testing {
namespace {

namespace d = ember::distributed;
using std::chrono::milliseconds;

class ProcessGroupNCCL : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    if (!d::is_nccl_available()) GTEST_SKIP() << "ember built without NCCL";
    store_ = std::make_shared<d::TCPStore>("127.0.0.1", 0, std::nullopt, true, milliseconds(30'000));
    pg_ = d::make_process_group_nccl(std::make_shared<d::PrefixStore>("test", store_), 0, 1);
  }

  std::shared_ptr<d::Store> store_;
  std::shared_ptr<d::ProcessGroup> pg_;
};

TEST_F(ProcessGroupNCCL, EveryCollectiveWithOneRank) {
  // With one rank every reduction is the identity and every gather a copy.
  for (ScalarType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8}) {
    SCOPED_TRACE(std::string(to_string(dt)));
    Tensor cpu = arange(12).reshape({3, 4}).to(dt);
    for (auto op :
         {d::ReduceOp::SUM, d::ReduceOp::AVG, d::ReduceOp::PRODUCT, d::ReduceOp::MIN, d::ReduceOp::MAX}) {
      if (op == d::ReduceOp::AVG && !is_floating_point(dt)) continue;
      Tensor g = cpu.cuda();
      pg_->all_reduce(g, op)->wait();
      EXPECT_CLOSE(g.cpu(), cpu) << d::to_string(op);
      Tensor r = cpu.cuda();
      pg_->reduce(r, 0, op)->wait();
      EXPECT_CLOSE(r.cpu(), cpu) << "reduce " << d::to_string(op);
    }
    Tensor g = cpu.cuda();
    pg_->broadcast(g, 0)->wait();
    EXPECT_CLOSE(g.cpu(), cpu);
    Tensor gathered = zeros({3, 4}, dt).cuda();
    pg_->all_gather_into_tensor(gathered, g)->wait();
    EXPECT_CLOSE(gathered.cpu(), cpu);
    std::vector<Tensor> outs = {zeros({3, 4}, dt).cuda()};
    pg_->all_gather(outs, g)->wait();
    EXPECT_CLOSE(outs[0].cpu(), cpu);
    Tensor scattered = zeros({3, 4}, dt).cuda();
    pg_->reduce_scatter_tensor(scattered, g)->wait();
    EXPECT_CLOSE(scattered.cpu(), cpu);
    Tensor exchanged = zeros({3, 4}, dt).cuda();
    pg_->all_to_all_single(exchanged, g)->wait();
    EXPECT_CLOSE(exchanged.cpu(), cpu);
  }
  pg_->barrier()->wait();
}

TEST_F(ProcessGroupNCCL, WorkIsOrderedAgainstTheCurrentStream) {
  // The NCCL stream waits for the mul_ queued before the collective; after wait() the current
  // stream waits for the collective, so the add_ sees its result.
  Tensor t = full({1 << 24}, 1.0).cuda();
  t.mul_(3);
  auto work = pg_->all_reduce(t, d::ReduceOp::MAX);
  work->wait();
  t.add_(1);
  EXPECT_CLOSE(t.cpu(), full({1 << 24}, 4.0));
  auto deadline = std::chrono::steady_clock::now() + milliseconds(10'000);
  while (!work->is_completed() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(1));
  EXPECT_TRUE(work->is_completed());
  EXPECT_TRUE(work->is_success());
  EXPECT_FALSE(work->exception());
  // A wait with a timeout blocks the host until the collective is done.
  Tensor u = full({1 << 20}, 2.0).cuda();
  EXPECT_TRUE(pg_->all_reduce(u)->wait(milliseconds(60'000)));
  EXPECT_CLOSE(u.cpu(), full({1 << 20}, 2.0));
}

TEST_F(ProcessGroupNCCL, RejectsCpuTensors) {
  EXPECT_EMBER_ERROR(pg_->all_reduce(zeros({2})), "ProcessGroupNCCL: all_reduce: NCCL takes CUDA tensors",
                     "use the gloo backend");
  EXPECT_EMBER_ERROR(pg_->broadcast(zeros({2}), 0), "ProcessGroupNCCL: broadcast: NCCL takes CUDA tensors");
  EXPECT_EQ(pg_->backend_name(), "nccl");
  EXPECT_EQ(std::string(std::getenv("NCCL_NVLS_ENABLE")), "0");  // set unless the environment set it
}

TEST_F(ProcessGroupNCCL, InitProcessGroupWorldOfOne) {
  d::InitOptions o;
  o.rank = 0;
  o.world_size = 1;
  o.local_rank = 0;
  o.master_addr = "127.0.0.1";
  o.master_port = 0;  // rank 0 hosts the store on a free port
  d::init_process_group("nccl", o);
  Tensor t = tensor({1.0, 2.0}).cuda();
  d::all_reduce(t);
  d::barrier();
  EXPECT_CLOSE(t.cpu(), tensor({1.0, 2.0}));
  d::destroy_process_group();
}

}  // namespace
}  // namespace ember::testing
