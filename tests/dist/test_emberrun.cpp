// emberrun: the environment it gives the workers, output prefixes and logs, stopping every
// process when one fails (exit codes, no process left behind), restarts, signal forwarding,
// two emberrun "nodes" on this machine forming one job, and torchrun's command lines.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <ember/cuda/device.h>

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
  for (const char* k :
       {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "RESTART_COUNT",
        "NCCL_NVLS_ENABLE", "EMBER_USE_AGENT_STORE", "OMP_NUM_THREADS", "TORCHELASTIC_RUN_ID"})
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
  std::printf("world %d sum %d run %s\n", world, static_cast<int>(t.item<double>()),
              env_or("TORCHELASTIC_RUN_ID").c_str());
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
        "NCCL_NVLS_ENABLE=0 EMBER_USE_AGENT_STORE=1 OMP_NUM_THREADS=1 TORCHELASTIC_RUN_ID=none";
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

// Nodes started with different --nnodes: both stop within seconds and say why, instead of one
// waiting out the rendezvous timeout for a node that never comes.
TEST(EmberRun, NodesWithDifferentNnodesStopWithAClearError) {
  TempDir dir;
  const std::string port = std::to_string(free_port());
  auto node = [&](int rank, int nnodes) {
    return Process(
        emberrun({"--nnodes", std::to_string(nnodes), "--node-rank", std::to_string(rank), "--master-addr",
                  "127.0.0.1", "--master-port", port, "--nproc-per-node", "1", "--rdzv-timeout", "60"},
                 "allreduce_ranks"),
        {}, dir.file("node" + std::to_string(rank)));
  };
  const auto start = Clock::now();
  Process n0 = node(0, 2);
  Process n1 = node(1, 3);
  EXPECT_NE(n0.wait(milliseconds(30'000)), 0) << n0.output();
  EXPECT_NE(n1.wait(milliseconds(30'000)), 0) << n1.output();
  EXPECT_LT(elapsed_ms(start), 15'000);
  const std::string both = n0.output() + n1.output();
  EXPECT_NE(both.find("was started with --nnodes"), std::string::npos) << both;
  EXPECT_NE(both.find("every node must be given the same --nnodes"), std::string::npos) << both;
}

// --- torchrun's command lines: the "Usage" examples of
// https://pytorch.org/docs/stable/elastic/run.html with `torchrun` replaced by emberrun and a
// program of ours instead of YOUR_TRAINING_SCRIPT.py ---

// `p` ran a job of `world` ranks (allreduce_ranks) with this TORCHELASTIC_RUN_ID.
void expect_job(Process& p, int world, const std::string& run_id) {
  ASSERT_EQ(p.wait(milliseconds(30'000)), 0) << p.output();
  std::string sum = std::to_string(world * (world - 1) / 2);
  for (int r = 0; r < world; ++r) {
    std::string line =
        "[rank " + std::to_string(r) + "]: world " + std::to_string(world) + " sum " + sum + " run " + run_id;
    EXPECT_NE(p.output().find(line), std::string::npos) << "missing: " << line << "\n" << p.output();
  }
}

TEST(EmberRun, RunsTorchrunsSingleNodeExamples) {
  TempDir dir;
  // Single-node multi-worker.
  Process standalone(emberrun({"--standalone", "--nnodes=1", "--nproc-per-node=2"}, "allreduce_ranks"), {},
                     dir.file("standalone"));
  expect_job(standalone, 2, "none");
  EXPECT_NE(standalone.output().find("store at 127.0.0.1:"), std::string::npos) << standalone.output();
  EXPECT_EQ(standalone.output().find("store at 127.0.0.1:29500"), std::string::npos) << standalone.output();
  // Stacked single-node multi-worker: two jobs at once on this host, each on a free port.
  std::vector<std::string> stacked = {"--rdzv-backend=c10d", "--rdzv-endpoint=localhost:0", "--nnodes=1",
                                      "--nproc-per-node=2"};
  Process a(emberrun(stacked, "allreduce_ranks"), {}, dir.file("stacked_a"));
  Process b(emberrun(stacked, "allreduce_ranks"), {}, dir.file("stacked_b"));
  expect_job(a, 2, "none");
  expect_job(b, 2, "none");
  EXPECT_NE(a.output().find("store at localhost:"), std::string::npos) << a.output();
  // The program is no Python script; torchrun's elastic MIN:MAX where MIN = MAX.
  Process no_python(
      emberrun({"--standalone", "--nnodes=1:1", "--nproc-per-node=2", "--no-python", "--rdzv-id=job7"},
               "allreduce_ranks"),
      {}, dir.file("no_python"));
  expect_job(no_python, 2, "job7");
}

TEST(EmberRun, RunsTorchrunsFaultTolerantExampleGivenNodeRanks) {
  TempDir dir;
  std::string port = std::to_string(free_port());
  auto node = [&](std::vector<std::string> node_rank, const std::string& log) {
    std::vector<std::string> options = {"--nnodes=2",          "--nproc-per-node=2",
                                        "--max-restarts=3",    "--rdzv-id=job42",
                                        "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:" + port};
    options.insert(options.end(), node_rank.begin(), node_rank.end());
    return Process(emberrun(options, "allreduce_ranks"), {}, dir.file(log));
  };
  // As written, torchrun's c10d hands out node ranks; emberrun says it does not.
  Process verbatim = node({}, "verbatim");
  EXPECT_EQ(verbatim.wait(milliseconds(10'000)), 2) << verbatim.output();
  EXPECT_NE(verbatim.output().find("--rdzv-backend c10d with --nnodes 2 needs --node-rank on each node"),
            std::string::npos)
      << verbatim.output();
  // With them, two nodes on this machine form one job.
  Process n1 = node({"--node-rank=1"}, "node1");
  Process n0 = node({"--node_rank", "0"}, "node0");
  ASSERT_EQ(n0.wait(milliseconds(30'000)), 0) << n0.output();
  ASSERT_EQ(n1.wait(milliseconds(30'000)), 0) << n1.output();
  EXPECT_NE(n0.output().find("store at 127.0.0.1:" + port), std::string::npos) << n0.output();
  std::string both = n0.output() + n1.output();
  for (int r = 0; r < 4; ++r) {
    std::string line = "[rank " + std::to_string(r) + "]: world 4 sum 6 run job42";
    EXPECT_NE(both.find(line), std::string::npos) << "missing: " << line << "\n" << both;
  }
  // Elastic (--nnodes=1:4) is refused, naming the option.
  Process elastic(emberrun({"--nnodes=1:4", "--nproc-per-node=2", "--max-restarts=3", "--rdzv-id=job42",
                            "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:" + port},
                           "allreduce_ranks"),
                  {}, dir.file("elastic"));
  EXPECT_EQ(elastic.wait(milliseconds(10'000)), 2) << elastic.output();
  EXPECT_NE(
      elastic.output().find("--nnodes 1:4: emberrun runs a fixed number of nodes, not an elastic MIN:MAX"),
      std::string::npos)
      << elastic.output();
}

// MASTER_PORT as the workers see it.
int worker_port(const std::string& out) {
  auto at = out.find("]: port=");
  return at == std::string::npos ? -1 : std::atoi(out.c_str() + at + 8);
}

TEST(EmberRun, RdzvEndpointIsTheMasterAddressAndPort) {
  TempDir dir;
  // Over --master-port even when that comes later; torchrun's port 29400 when there is none.
  Process free({EMBER_EMBERRUN_PATH, "--rdzv-endpoint", "127.0.0.1:0", "--master-port", "29500", self_exe(),
                "--worker", "print_env"},
               {}, dir.file("free"));
  ASSERT_EQ(free.wait(milliseconds(20'000)), 0) << free.output();
  EXPECT_GT(worker_port(free.output()), 0) << free.output();
  EXPECT_NE(worker_port(free.output()), 29500) << free.output();
  Process fixed(emberrun({"--rdzv_endpoint=127.0.0.1"}, "print_env"), {}, dir.file("fixed"));
  ASSERT_EQ(fixed.wait(milliseconds(20'000)), 0) << fixed.output();
  EXPECT_EQ(worker_port(fixed.output()), 29400) << fixed.output();
  EXPECT_NE(fixed.output().find("MASTER_ADDR=127.0.0.1 "), std::string::npos) << fixed.output();
}

TEST(EmberRun, NprocPerNodeTakesTorchrunsWords) {
  TempDir dir;
  const int gpus = cuda::device_count();
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  for (auto [word, expected] : std::vector<std::pair<std::string, int>>{
           {"cpu", cores}, {"auto", gpus > 0 ? gpus : cores}, {"gpu", gpus}}) {
    Process p({EMBER_EMBERRUN_PATH, "--standalone", "--nproc-per-node", word, "/bin/sh", "-c",
               "echo local world $LOCAL_WORLD_SIZE"},
              {}, dir.file(word));
    if (expected == 0) {  // gpu without GPUs
      EXPECT_EQ(p.wait(milliseconds(10'000)), 2) << p.output();
      EXPECT_NE(p.output().find("--nproc-per-node gpu: no GPU found"), std::string::npos) << p.output();
      continue;
    }
    ASSERT_EQ(p.wait(milliseconds(30'000)), 0) << word << ": " << p.output();
    std::string n = std::to_string(expected);
    EXPECT_NE(p.output().find("[rank " + std::to_string(expected - 1) + "]: local world " + n),
              std::string::npos)
        << word << ": " << p.output();
    EXPECT_EQ(p.output().find("[rank " + n + "]"), std::string::npos) << word << ": " << p.output();
  }
}

TEST(EmberRun, RedirectsTeeAndLocalRanksFilterChooseWhatTheConsoleShows) {
  TempDir dir;
  auto run = [&](std::vector<std::string> options, const std::string& name) {
    options.insert(options.begin(), {"--standalone", "--nproc-per-node=2"});
    Process p(emberrun(options, "print_env"), {}, dir.file(name + ".out"));
    EXPECT_EQ(p.wait(milliseconds(20'000)), 0) << p.output();
    return p.output();
  };
  // Whether the console shows rank r's stdout / stderr.
  auto out_shown = [](const std::string& out, int r) {
    return out.find("[rank " + std::to_string(r) + "]: RANK=" + std::to_string(r)) != std::string::npos;
  };
  auto err_shown = [](const std::string& out, int r) {
    return out.find("[rank " + std::to_string(r) + "]: to stderr from " + std::to_string(r)) !=
           std::string::npos;
  };
  // Whatever the console shows, the log files hold both streams.
  auto expect_logged = [](const std::string& logs) {
    for (int r = 0; r < 2; ++r) {
      std::string log = read_file(logs + "/rank_" + std::to_string(r) + ".log");
      EXPECT_NE(log.find("RANK=" + std::to_string(r) + " LOCAL_RANK="), std::string::npos) << log;
      EXPECT_NE(log.find("to stderr from " + std::to_string(r)), std::string::npos) << log;
    }
  };
  std::string out = run({"--log-dir", dir.file("r1"), "-r", "1"}, "r1");  // stdout of every rank
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(out_shown(out, r)) << out;
    EXPECT_TRUE(err_shown(out, r)) << out;
  }
  expect_logged(dir.file("r1"));
  out = run({"--log_dir=" + dir.file("map"), "-r0:3,1:2"}, "map");  // rank 0 both streams, rank 1 stderr
  EXPECT_FALSE(out_shown(out, 0)) << out;
  EXPECT_FALSE(err_shown(out, 0)) << out;
  EXPECT_TRUE(out_shown(out, 1)) << out;
  EXPECT_FALSE(err_shown(out, 1)) << out;
  expect_logged(dir.file("map"));
  // --tee without --log-dir: a new directory, named on stderr; the filter hides rank 0.
  out = run({"-t", "3", "--local-ranks-filter=1"}, "tee");
  EXPECT_FALSE(out_shown(out, 0)) << out;
  EXPECT_FALSE(err_shown(out, 0)) << out;
  EXPECT_TRUE(out_shown(out, 1)) << out;
  EXPECT_TRUE(err_shown(out, 1)) << out;
  const std::string said = "the log files go to ";
  auto at = out.find(said);
  ASSERT_NE(at, std::string::npos) << out;
  std::string logs = out.substr(at + said.size(), out.find('\n', at) - at - said.size());
  expect_logged(logs);
  std::filesystem::remove_all(logs);
}

TEST(EmberRun, HelpAndBadArguments) {
  TempDir dir;
  Process help({EMBER_EMBERRUN_PATH, "--help"}, {}, dir.file("help"));
  EXPECT_EQ(help.wait(milliseconds(10'000)), 0);
  for (const char* opt : {"--nproc-per-node",
                          "--nnodes",
                          "--node-rank",
                          "--master-addr",
                          "--master-port",
                          "--standalone",
                          "--rdzv-endpoint",
                          "--rdzv-backend",
                          "--rdzv-id",
                          "--max-restarts",
                          "--log-dir",
                          "--redirects",
                          "--tee",
                          "--local-ranks-filter",
                          "--no-python",
                          "--monitor-interval",
                          "--grace-period",
                          "--rdzv-timeout",
                          "RANK",
                          "LOCAL_RANK",
                          "WORLD_SIZE",
                          "LOCAL_WORLD_SIZE",
                          "GROUP_RANK",
                          "MASTER_ADDR",
                          "MASTER_PORT",
                          "RESTART_COUNT",
                          "TORCHELASTIC_RUN_ID",
                          "SIGTERM",
                          "[rank N]: "})
    EXPECT_NE(help.output().find(opt), std::string::npos) << "--help does not mention " << opt;
  struct Bad {
    std::vector<std::string> argv;
    int code;
    const char* message;
  };
  for (const Bad& b : std::vector<Bad>{
           {{"--nproc-per-node", "2"}, 2, "emberrun: no program to run"},
           {{"--bogus", "1", "prog"}, 2, "emberrun: unknown option --bogus"},
           {{"--nproc-per-node", "0", "prog"},
            2,
            "--nproc-per-node needs an integer >= 1 (or gpu, cpu, auto), got '0'"},
           {{"-m", "prog"}, 2, "emberrun: unknown option -m"},
           {{"--standalone=1", "prog"}, 2, "--standalone takes no value"},
           {{"--standalone", "--nnodes", "2", "prog"}, 2, "--standalone runs one node, got --nnodes 2"},
           {{"--nnodes=2:1", "prog"}, 2, "--nnodes 2:1: emberrun runs a fixed number of nodes"},
           {{"--nnodes=1:x", "prog"}, 2, "--nnodes needs an integer >= 1, got 'x'"},
           {{"--nnodes=1:1:1", "prog"}, 2, "--nnodes needs M or MIN:MAX, got '1:1:1'"},
           {{"--rdzv-backend", "etcd", "prog"}, 2, "--rdzv-backend etcd: emberrun has c10d and static only"},
           {{"--rdzv-endpoint", ":29400", "prog"}, 2, "--rdzv-endpoint needs HOST[:PORT], got ':29400'"},
           {{"--rdzv-endpoint", "[::1", "prog"}, 2, "--rdzv-endpoint needs HOST[:PORT], got '[::1'"},
           {{"--rdzv-endpoint", "[::1]29400", "prog"}, 2, "--rdzv-endpoint needs HOST[:PORT]"},
           {{"--rdzv-endpoint", "host:", "prog"}, 2, "--rdzv-endpoint's port needs an integer >= 0, got ''"},
           {{"--rdzv-endpoint", "host:70000", "prog"}, 2, "--rdzv-endpoint's port 70000 is above 65535"},
           {{"--redirects", "4", "prog"},
            2,
            "--redirects needs 0-3, or LOCAL_RANK:0-3 pairs like 0:3,1:2, got '4'"},
           {{"-t", "0:3,1", "prog"}, 2, "--tee needs 0-3, or LOCAL_RANK:0-3 pairs"},
           {{"-t0:5", "prog"}, 2, "--tee needs 0-3, or LOCAL_RANK:0-3 pairs like 0:3,1:2, got '0:5'"},
           {{"--local-ranks-filter", "0,x", "prog"}, 2, "--local-ranks-filter needs an integer >= 0"},
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
