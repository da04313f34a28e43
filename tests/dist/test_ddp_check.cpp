// tools/ddp_check (DDP and SyncBatchNorm against one process on the whole batch; run on GPUs with
// NCCL by scripts/multi_gpu_check.sh) under emberrun with Gloo at world 2, and tools/allreduce_loop,
// the job that script stops a rank of: the other rank's collective times out, naming itself.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "dist_test_util.h"

namespace ember::testing::dist {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> under_emberrun(const char* program, std::vector<std::string> args) {
  std::vector<std::string> argv = {
      EMBER_EMBERRUN_PATH, "--nproc-per-node", "2", "--master-port", "0", program};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

TEST(DdpCheck, GlooWorld2Passes) {
  TempDir dir;
  Process p(under_emberrun(EMBER_DDP_CHECK_PATH, {"--backend", "gloo", "--steps", "5", "--batch", "4"}), {},
            dir.file("log"));
  ASSERT_EQ(p.wait(milliseconds(120'000)), 0) << p.output();
  std::string out = p.output();
  EXPECT_NE(out.find("ddp_check: gloo, world size 2, cpu, 5 steps of 4 rows per rank"), std::string::npos)
      << out;
  for (const char* check : {"ddp_f32", "ddp_bf16", "no_sync", "sync_batch_norm"})
    EXPECT_NE(out.find(std::string("[rank 0]: PASS ") + check + " max_diff="), std::string::npos)
        << check << out;
  EXPECT_EQ(out.find("FAIL"), std::string::npos) << out;
}

TEST(DdpCheck, BadOptions) {
  TempDir dir;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--backend", "mpi"}, "ddp_check: unknown backend mpi"},
      {{"--device", "tpu"}, "ddp_check: unknown device tpu"},
      {{"--steps", "0"}, "ddp_check: --steps and --timeout-s need a positive number"},
      {{"--batch"}, "ddp_check: option --batch needs a value"},
      {{"--steps", "5x"}, "ddp_check: option --steps needs an integer, got '5x'"},
      {{"--lr", "1"}, "ddp_check: unknown option --lr"}};
  for (size_t i = 0; i < cases.size(); ++i) {
    std::vector<std::string> argv = {EMBER_DDP_CHECK_PATH};
    argv.insert(argv.end(), cases[i].first.begin(), cases[i].first.end());
    Process p(argv, {}, dir.file("log" + std::to_string(i)));
    EXPECT_EQ(p.wait(milliseconds(10'000)), 2) << p.output();
    EXPECT_NE(p.output().find(cases[i].second), std::string::npos) << p.output();
  }
}

// The pid of emberrun's worker with RANK=rank, or -1.
pid_t worker_pid(pid_t emberrun, int rank) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string pid, comm, state;
    pid_t ppid = 0;
    if (!(stat >> pid >> comm >> state >> ppid) || ppid != emberrun) continue;
    std::string env = read_file((entry.path() / "environ").string());
    if (env.find(std::string("\0RANK=", 6) + std::to_string(rank) + '\0') != std::string::npos ||
        env.rfind("RANK=" + std::to_string(rank) + '\0', 0) == 0)
      return std::atoi(name.c_str());
  }
  return -1;
}

// Rank 1 stopped mid-loop: rank 0's all-reduce fails after the 2 s timeout with an error naming
// the collective and the rank, and emberrun stops the job (SIGKILL after its grace period).
TEST(AllreduceLoop, StoppedRankTimesOutTheOthers) {
  TempDir dir;
  Process p(under_emberrun(EMBER_ALLREDUCE_LOOP_PATH,
                           {"--backend", "gloo", "--numel", "1024", "--timeout-s", "2", "--seconds", "60"}),
            {}, dir.file("log"));
  auto deadline = Clock::now() + milliseconds(30'000);
  while (p.output().find("rank 1 running") == std::string::npos && Clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(20));
  ASSERT_NE(p.output().find("rank 1 running"), std::string::npos) << p.output();
  pid_t rank1 = worker_pid(p.pid(), 1);
  ASSERT_GT(rank1, 0);
  ASSERT_EQ(kill(rank1, SIGSTOP), 0);
  auto stopped = Clock::now();
  EXPECT_EQ(p.wait(milliseconds(30'000)), 1) << p.output();
  auto ms = std::chrono::duration_cast<milliseconds>(Clock::now() - stopped).count();
  EXPECT_GE(ms, 2'000);  // not before the timeout
  std::string out = p.output();
  EXPECT_NE(out.find("[rank 0]: allreduce_loop: rank 0: ProcessGroupGloo: all_reduce #"), std::string::npos)
      << out;
  EXPECT_NE(out.find("(rank 0 of 2) failed"), std::string::npos) << out;
  EXPECT_FALSE(process_alive(rank1));
}

}  // namespace
}  // namespace ember::testing::dist
