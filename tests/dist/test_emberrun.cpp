// emberrun: the environment it gives the workers, output prefixes and logs, stopping every
// process when one fails (exit codes, no process left behind), restarts, signal forwarding,
// and two emberrun "nodes" on this machine forming one job.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "dist_test_util.h"

namespace ember::testing::dist {
namespace {

using Clock = std::chrono::steady_clock;

std::string env_or(const char* name, const char* fallback = "(unset)") {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

// Records this process's pid (and, with `grandchild`, starts a sleeping child in its process
// group and records that too) in PID_DIR, so the test can check nothing is left.
void record_pids(bool grandchild) {
  std::string dir = env_or("PID_DIR");
  write_file(dir + "/pid_" + env_or("RANK"), std::to_string(getpid()));
  if (!grandchild) return;
  pid_t child = fork();
  if (child == 0) {
    execl("/bin/sleep", "sleep", "60", static_cast<char*>(nullptr));
    _exit(127);
  }
  write_file(dir + "/child_" + env_or("RANK"), std::to_string(child));
}

// --- Workers run by emberrun ---

DIST_WORKER(print_env) {
  std::string line;
  for (const char* k : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
                        "RESTART_COUNT", "NCCL_NVLS_ENABLE", "EMBER_USE_AGENT_STORE", "OMP_NUM_THREADS"})
    line += std::string(k) + "=" + env_or(k) + " ";
  std::printf("%s\n", line.c_str());
  std::printf("port=%s\n", env_or("MASTER_PORT").c_str());
  std::fprintf(stderr, "to stderr from %s\n", env_or("RANK").c_str());
  std::printf("no newline at the end");
  std::fflush(stdout);
}

// Rank 1 fails (exit code 3, or SIGKILL with CRASH_SIGNAL); the others hang around, with a
// child each, until stopped (rank 0 ignores SIGTERM with IGNORE_SIGTERM).
DIST_WORKER(crash_one) {
  record_pids(true);
  if (env_int("RANK") == 1) {
    std::this_thread::sleep_for(milliseconds(300));
    if (std::getenv("CRASH_SIGNAL")) kill(getpid(), SIGKILL);
    std::exit(3);
  }
  if (std::getenv("IGNORE_SIGTERM") && env_int("RANK") == 0) signal(SIGTERM, SIG_IGN);
  std::this_thread::sleep_for(std::chrono::seconds(60));
}

DIST_WORKER(sleep_forever) {
  record_pids(true);
  std::this_thread::sleep_for(std::chrono::seconds(60));
}

// Rank 0 fails in the first two attempts.
DIST_WORKER(fail_twice) {
  std::printf("attempt %s\n", env_or("RESTART_COUNT").c_str());
  std::fflush(stdout);
  if (env_int("RANK") == 0 && env_int("RESTART_COUNT") < 2) {
    std::this_thread::sleep_for(milliseconds(100));
    std::exit(1);
  }
}

// A real job: every rank all-reduces its rank over the whole world. FAIL_RANK exits 5 at once
// instead (the others then wait in init_process_group until emberrun stops them).
DIST_WORKER(allreduce_ranks) {
  if (std::getenv("FAIL_RANK") && env_int("FAIL_RANK") == env_int("RANK")) std::exit(5);
  distributed::init_process_group("gloo");
  int rank = distributed::get_rank(), world = distributed::get_world_size();
  Tensor t = full({1}, double(rank));
  distributed::all_reduce(t);
  std::printf("world %d sum %d\n", world, static_cast<int>(t.item<double>()));
  distributed::destroy_process_group();
}

// --- Tests ---

std::vector<std::string> emberrun(std::vector<std::string> options, const std::string& worker) {
  std::vector<std::string> argv = {EMBER_EMBERRUN_PATH};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {self_exe(), "--worker", worker});
  return argv;
}

int64_t elapsed_ms(Clock::time_point since) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - since).count();
}

// Every pid recorded in `dir` (workers and their children) is gone.
void expect_all_gone(const std::string& dir, size_t expected_count) {
  size_t n = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    std::string name = f.path().filename().string();
    if (name.rfind("pid_", 0) != 0 && name.rfind("child_", 0) != 0) continue;
    pid_t pid = std::atoi(read_file(f.path().string()).c_str());
    ++n;
    EXPECT_FALSE(process_alive(pid)) << name << " (pid " << pid << ") is still alive";
  }
  EXPECT_EQ(n, expected_count);
}

void wait_for_files(const std::string& dir, size_t count) {
  auto deadline = Clock::now() + milliseconds(10'000);
  while (Clock::now() < deadline) {
    size_t n = 0;
    for ([[maybe_unused]] const auto& f : std::filesystem::directory_iterator(dir)) ++n;
    if (n >= count) return;
    std::this_thread::sleep_for(milliseconds(10));
  }
}

TEST(EmberRun, SetsTheEnvironmentAndPrefixesEachLine) {
  TempDir dir;
  std::string logs = dir.file("logs");
  Process p(emberrun({"--nproc-per-node", "2", "--master-port", "0", "--log-dir", logs}, "print_env"), {},
            dir.file("out"));
  ASSERT_EQ(p.wait(milliseconds(20'000)), 0) << p.output();
  std::string out = p.output();
  for (int r = 0; r < 2; ++r) {
    std::string rs = std::to_string(r);
    std::string expected =
        "[rank " + rs + "]: RANK=" + rs + " LOCAL_RANK=" + rs +
        " WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 GROUP_RANK=0 MASTER_ADDR=127.0.0.1 RESTART_COUNT=0 "
        "NCCL_NVLS_ENABLE=0 EMBER_USE_AGENT_STORE=1 OMP_NUM_THREADS=1";
    EXPECT_NE(out.find(expected), std::string::npos) << "missing: " << expected << "\nin:\n" << out;
    EXPECT_NE(out.find("[rank " + rs + "]: to stderr from " + rs), std::string::npos) << out;
    EXPECT_NE(out.find("[rank " + rs + "]: no newline at the end\n"), std::string::npos) << out;
    std::string log = read_file(logs + "/rank_" + rs + ".log");
    // Both streams, unprefixed, in the order they arrived.
    EXPECT_NE(("\n" + log).find("\nRANK=" + rs + " LOCAL_RANK=" + rs), std::string::npos) << log;
    EXPECT_EQ(log.find("[rank"), std::string::npos) << "the log has prefixed lines:\n" << log;
    EXPECT_NE(log.find("to stderr from " + rs), std::string::npos) << log;
  }
  // MASTER_PORT is the store's real port (0 asked for a free one), the same for both ranks.
  auto at = out.find("]: port=");
  ASSERT_NE(at, std::string::npos) << out;
  int port = std::atoi(out.c_str() + at + 8);
  EXPECT_GT(port, 0);
  EXPECT_NE(out.find("emberrun: 2 processes on 1 node(s), store at 127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << out;
}

TEST(EmberRun, AFailingRankStopsTheOthersAndGivesItsExitCode) {
  TempDir dir;
  auto start = Clock::now();
  Process p(emberrun({"--nproc-per-node", "3", "--master-port", "0"}, "crash_one"), {{"PID_DIR", dir.path()}},
            dir.file("out"));
  EXPECT_EQ(p.wait(milliseconds(30'000)), 3) << p.output();
  EXPECT_LT(elapsed_ms(start), 10'000);
  EXPECT_NE(p.output().find("emberrun: rank 1 (pid "), std::string::npos) << p.output();
  EXPECT_NE(p.output().find("exited with code 3; stopping the other workers"), std::string::npos)
      << p.output();
  expect_all_gone(dir.path(), 6);
}

TEST(EmberRun, ASignalledRankGives128PlusTheSignalAndSigkillFollowsTheGracePeriod) {
  TempDir dir;
  auto start = Clock::now();
  // Rank 0 ignores SIGTERM: only the SIGKILL after the 0.5 s grace period stops it.
  Process p(emberrun({"--nproc-per-node", "2", "--master-port", "0", "--grace-period", "0.5"}, "crash_one"),
            {{"PID_DIR", dir.path()}, {"CRASH_SIGNAL", "1"}, {"IGNORE_SIGTERM", "1"}}, dir.file("out"));
  EXPECT_EQ(p.wait(milliseconds(30'000)), 128 + SIGKILL) << p.output();
  EXPECT_LT(elapsed_ms(start), 10'000);
  EXPECT_NE(p.output().find("was killed by signal 9"), std::string::npos) << p.output();
  expect_all_gone(dir.path(), 4);
}

TEST(EmberRun, RestartsTheWholeGroupUpToMaxRestarts) {
  TempDir dir;
  Process ok(emberrun({"--nproc-per-node", "2", "--master-port", "0", "--max-restarts", "2"}, "fail_twice"),
             {}, dir.file("ok"));
  EXPECT_EQ(ok.wait(milliseconds(30'000)), 0) << ok.output();
  std::string out = ok.output();
  for (int attempt = 0; attempt < 3; ++attempt)
    for (int r = 0; r < 2; ++r) {
      std::string line = "[rank " + std::to_string(r) + "]: attempt " + std::to_string(attempt);
      EXPECT_NE(out.find(line), std::string::npos) << "missing: " << line << "\n" << out;
    }
  EXPECT_NE(out.find("restarting the workers (restart 2 of 2)"), std::string::npos) << out;
  Process fails(
      emberrun({"--nproc-per-node", "2", "--master-port", "0", "--max-restarts", "1"}, "fail_twice"), {},
      dir.file("fails"));
  EXPECT_EQ(fails.wait(milliseconds(30'000)), 1) << fails.output();
  EXPECT_NE(fails.output().find("no restarts left (1 used)"), std::string::npos) << fails.output();
}

TEST(EmberRun, ForwardsSigtermAndLeavesNothingBehind) {
  TempDir dir;
  Process p(emberrun({"--nproc-per-node", "2", "--master-port", "0"}, "sleep_forever"),
            {{"PID_DIR", dir.path()}}, dir.file("out"));
  wait_for_files(dir.path(), 5);  // two pids, two children, the output file
  auto start = Clock::now();
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(milliseconds(20'000)), 128 + SIGTERM) << p.output();
  EXPECT_LT(elapsed_ms(start), 5000);
  EXPECT_NE(p.output().find("got signal 15: stopping the workers"), std::string::npos) << p.output();
  expect_all_gone(dir.path(), 4);
}

TEST(EmberRun, TwoNodesOnOneMachineFormOneJob) {
  TempDir dir;
  std::string port = std::to_string(free_port());
  auto node = [&](int rank, const Env& env) {
    return Process(emberrun({"--nnodes", "2", "--node-rank", std::to_string(rank), "--master-addr",
                             "127.0.0.1", "--master-port", port, "--nproc-per-node", "2"},
                            "allreduce_ranks"),
                   env, dir.file("node" + std::to_string(rank) + "_" + std::to_string(env.size())));
  };
  {
    Process n1 = node(1, {});  // the non-master node first: it waits for the store
    Process n0 = node(0, {});
    EXPECT_EQ(n0.wait(milliseconds(30'000)), 0) << n0.output();
    EXPECT_EQ(n1.wait(milliseconds(30'000)), 0) << n1.output();
    for (int r = 0; r < 4; ++r) {
      std::string line = "[rank " + std::to_string(r) + "]: world 4 sum 6";
      EXPECT_NE((r < 2 ? n0 : n1).output().find(line), std::string::npos) << "missing: " << line << "\n"
                                                                          << n0.output() << n1.output();
    }
  }
  // A rank failing on node 1 stops node 0 too; both exit with its code.
  port = std::to_string(free_port());
  Process n0 = node(0, {{"FAIL_RANK", "3"}});
  Process n1 = node(1, {{"FAIL_RANK", "3"}});
  EXPECT_EQ(n1.wait(milliseconds(30'000)), 5) << n1.output();
  EXPECT_EQ(n0.wait(milliseconds(30'000)), 5) << n0.output();
  EXPECT_NE(n0.output().find("rank 3 on node 1 failed (code 5)"), std::string::npos) << n0.output();
}

TEST(EmberRun, HelpAndBadArguments) {
  TempDir dir;
  Process help({EMBER_EMBERRUN_PATH, "--help"}, {}, dir.file("help"));
  EXPECT_EQ(help.wait(milliseconds(10'000)), 0);
  for (const char* opt : {"--nproc-per-node", "--nnodes",         "--node-rank", "--master-addr",
                          "--master-port",    "--max-restarts",   "--log-dir",   "--monitor-interval",
                          "--grace-period",   "--rdzv-timeout",   "RANK",        "LOCAL_RANK",
                          "WORLD_SIZE",       "LOCAL_WORLD_SIZE", "GROUP_RANK",  "MASTER_ADDR",
                          "MASTER_PORT",      "RESTART_COUNT",    "SIGTERM",     "[rank N]: "})
    EXPECT_NE(help.output().find(opt), std::string::npos) << "--help does not mention " << opt;
  struct Bad {
    std::vector<std::string> argv;
    int code;
    const char* message;
  };
  for (const Bad& b : std::vector<Bad>{
           {{"--nproc-per-node", "2"}, 2, "emberrun: no program to run"},
           {{"--bogus", "1", "prog"}, 2, "emberrun: unknown option --bogus"},
           {{"--nproc-per-node", "0", "prog"}, 2, "--nproc-per-node needs an integer >= 1, got '0'"},
           {{"--nnodes", "2", "--node-rank", "2", "prog"}, 2, "--node-rank 2 is not below --nnodes 2"},
           {{"--nnodes", "2", "--master-port", "0", "prog"},
            2,
            "--master-port 0 (a free port) works with one node"},
           {{"--monitor-interval", "-1", "prog"}, 2, "--monitor-interval needs a positive number of seconds"},
           {{"--master-port", "0", "no_such_program_xyz"},
            1,
            "program 'no_such_program_xyz' not found on PATH"},
       }) {
    std::vector<std::string> argv = {EMBER_EMBERRUN_PATH};
    argv.insert(argv.end(), b.argv.begin(), b.argv.end());
    Process p(argv, {}, dir.file("bad"));
    EXPECT_EQ(p.wait(milliseconds(10'000)), b.code) << p.output();
    EXPECT_NE(p.output().find(b.message), std::string::npos) << p.output();
  }
  // torchrun's spellings work too.
  Process underscores({EMBER_EMBERRUN_PATH, "--nproc_per_node=1", "--master_port=0", "/bin/true"}, {},
                      dir.file("u"));
  EXPECT_EQ(underscores.wait(milliseconds(10'000)), 0) << underscores.output();
}

}  // namespace
}  // namespace ember::testing::dist
