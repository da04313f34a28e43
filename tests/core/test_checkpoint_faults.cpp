// Checkpoints under kill -9. A child process saves a checkpoint over and over and is killed at a
// random moment, again and again. After each kill the file on disk is one whole earlier save:
// it loads, its checksums pass, and every element holds that save's number. The next save removes
// the temporary files the killed processes left. EMBER_CHECKPOINT_KILLS sets the number of kills
// (default 25, for CI).
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ember/ember.h"
#include "test_util.h"

extern char** environ;

namespace ember::testing {
namespace {

namespace fs = std::filesystem;

// Save number `n`: 12 MiB in which every element is n.
OrderedDict<Tensor> version(int64_t n) {
  OrderedDict<Tensor> t;
  t.insert("a", full({int64_t{1} << 21}, static_cast<double>(n), kFloat32));
  t.insert("b", full({int64_t{1} << 20}, static_cast<double>(n), kFloat32));
  t.insert("step", full({}, n, kInt64));
  return t;
}

// The child: saves versions first, first + 1, ... to EMBER_SAVE_LOOP_PATH until killed, touching
// EMBER_SAVE_LOOP_MARK after the first one.
TEST(CheckpointFaults, DISABLED_SaveLoop) {
  const char* path = std::getenv("EMBER_SAVE_LOOP_PATH");
  const char* mark = std::getenv("EMBER_SAVE_LOOP_MARK");
  const char* first = std::getenv("EMBER_SAVE_LOOP_FIRST");
  ASSERT_TRUE(path && mark && first) << "run by CheckpointFaults.KilledSavesLeaveAWholeCheckpoint";
  for (int64_t n = std::atoll(first);; ++n) {
    save(version(n), path);
    if (!fs::exists(mark)) std::ofstream(mark) << n;
  }
}

pid_t spawn_save_loop(const std::string& path, const std::string& mark, int64_t first) {
  std::vector<std::string> env_strings{"EMBER_SAVE_LOOP_PATH=" + path, "EMBER_SAVE_LOOP_MARK=" + mark,
                                       "EMBER_SAVE_LOOP_FIRST=" + std::to_string(first), "OMP_NUM_THREADS=1"};
  std::vector<char*> env;
  for (std::string& s : env_strings) env.push_back(s.data());
  for (char** e = environ; *e; ++e) env.push_back(*e);
  env.push_back(nullptr);
  std::string exe = fs::read_symlink("/proc/self/exe").string(),
              filter = "--gtest_filter=CheckpointFaults.DISABLED_SaveLoop",
              disabled = "--gtest_also_run_disabled_tests", quiet = "--gtest_brief=1";
  char* argv[] = {exe.data(), filter.data(), disabled.data(), quiet.data(), nullptr};
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, env.data()), 0);
  return pid;
}

TEST(CheckpointFaults, KilledSavesLeaveAWholeCheckpoint) {
  const char* env = std::getenv("EMBER_CHECKPOINT_KILLS");
  const int kills = env ? std::atoi(env) : 25;
  TempDir dir, marks;
  const std::string path = dir.file("ckpt.safetensors");
  save(version(0), path);
  std::mt19937 rng(7);
  int64_t newest = 0;
  int left_behind = 0;  // kills that caught a save half-written
  for (int k = 1; k <= kills; ++k) {
    SCOPED_TRACE("kill " + std::to_string(k));
    const std::string mark = marks.file("started." + std::to_string(k));
    const pid_t pid = spawn_save_loop(path, mark, int64_t{1000} * k);
    ASSERT_GT(pid, 0);
    // Once the child has saved once, kill it at a random point of a later save.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!fs::exists(mark) && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_TRUE(fs::exists(mark)) << "the saving child never finished a save";
    std::this_thread::sleep_for(
        std::chrono::microseconds(std::uniform_int_distribution<int>(0, 150000)(rng)));
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;

    StateDict state;
    ASSERT_NO_THROW(state = load(path));  // every checksum is verified
    const int64_t n = state.tensors["step"].item<int64_t>();
    EXPECT_GE(n, int64_t{1000} * k) << "the newest whole save is from this child";
    EXPECT_TRUE(state.tensors["a"].equal(version(n).at("a")) && state.tensors["b"].equal(version(n).at("b")))
        << "save " << n << " is mixed with another";
    newest = n;
    left_behind += dir.count() > 1 ? 1 : 0;
  }
  // The next save clears what the killed children left.
  save(version(newest + 1), path);
  EXPECT_EQ(dir.count(), 1u);
  std::printf("CheckpointFaults: %d kills, %d of them mid-write, newest save %lld\n", kills, left_behind,
              static_cast<long long>(newest));
}

}  // namespace
}  // namespace ember::testing
