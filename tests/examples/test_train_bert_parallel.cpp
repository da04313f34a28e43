// examples/train_bert_parallel as a user runs it: under emberrun over Gloo, data, pipeline and
// tensor parallelism, each alone and combined up to a DP 2 x PP 2 x TP 2 mesh of 8 processes, give
// the losses of one process on the same global batches, and a longer single-process run learns.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "ember/distributed/process_group_gloo.h"
#include "test_util.h"

namespace ember::testing {
namespace {

// The losses of the "step N loss X" lines of a log.
std::vector<double> losses(const std::string& log) {
  std::vector<double> out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    size_t at = line.find("loss ");
    if (line.find("step ") != std::string::npos && at != std::string::npos)
      out.push_back(std::stod(line.substr(at + 5)));
  }
  return out;
}

// Runs the trainer (under emberrun with `nproc` processes when more than one); returns its log.
std::string train(int nproc, const std::string& args) {
  TempDir tmp;
  const std::string log = tmp.file("log");
  std::string cmd = nproc > 1 ? std::string("OMP_NUM_THREADS=1 ") + EMBER_EMBERRUN_PATH +
                                    " --nproc-per-node " + std::to_string(nproc) + " --master-port 0 "
                              : std::string();
  cmd += std::string(EMBER_TRAIN_BERT_PARALLEL_PATH) + " --device cpu " + args + " > " + log + " 2>&1";
  int status = std::system(cmd.c_str());
  EXPECT_EQ(status, 0) << cmd << "\n" << read_text(log);
  return read_text(log);
}

TEST(TrainBertParallel, EveryMeshGivesTheLossesOfOneProcess) {
  if (!distributed::is_gloo_available()) GTEST_SKIP() << "ember was built without Gloo";
  const std::string args = "--steps 12 --log-every 3 --batch 8 --seq 16 --vocab 128 --d-model 64 --ffn 128";
  const std::vector<double> one = losses(train(1, args));
  ASSERT_EQ(one.size(), 4u);
  struct Mesh {
    int nproc;
    const char* args;
    const char* says;
  };
  for (Mesh m : {Mesh{2, "--tensor-parallel 2", "1 data-parallel x 1 pipeline stages x 2 tensor-parallel"},
                 Mesh{2, "", "2 data-parallel x 1 pipeline stages x 1 tensor-parallel"},
                 Mesh{2, "--pipeline-parallel 2", "1 data-parallel x 2 pipeline stages x 1 tensor-parallel"},
                 Mesh{4, "--tensor-parallel 2", "2 data-parallel x 1 pipeline stages x 2 tensor-parallel"},
                 Mesh{8, "--pipeline-parallel 2 --tensor-parallel 2",
                      "2 data-parallel x 2 pipeline stages x 2 tensor-parallel on"},
                 Mesh{4, "--tensor-parallel 4 --sequence-parallel",
                      "1 data-parallel x 1 pipeline stages x 4 tensor-parallel (sequence parallel)"},
                 Mesh{8, "--pipeline-parallel 2 --tensor-parallel 2 --sequence-parallel",
                      "2 data-parallel x 2 pipeline stages x 2 tensor-parallel (sequence parallel)"}}) {
    SCOPED_TRACE(m.says);
    const std::string log = train(m.nproc, args + " " + m.args);
    EXPECT_NE(log.find(m.says), std::string::npos) << log;
    const std::vector<double> got = losses(log);
    ASSERT_EQ(got.size(), one.size()) << log;
    for (size_t i = 0; i < one.size(); ++i) EXPECT_NEAR(got[i], one[i], 1e-4 * one[i]) << "line " << i;
  }
}

TEST(TrainBertParallel, LearnsToRecoverMaskedTokensFromTheirCopies) {
  // ln(128) = 4.85 at the start; the run fails itself above 1.5 at the end.
  const std::vector<double> l = losses(train(1,
                                             "--steps 400 --log-every 100 --seq 16 --vocab 128 "
                                             "--d-model 64 --ffn 256 --lr 3e-3 --max-final-loss 1.5"));
  ASSERT_EQ(l.size(), 4u);
  EXPECT_GT(l.front(), 3.0);
}

TEST(TrainBertParallel, RefusesAMeshThatDoesNotFit) {
  TempDir tmp;
  const std::string log = tmp.file("log");
  int status = run_program(EMBER_TRAIN_BERT_PARALLEL_PATH, "--device cpu --tensor-parallel 3", log);
  EXPECT_NE(status, 0);
  EXPECT_NE(read_text(log).find("--tensor-parallel 3 x --pipeline-parallel 1 must divide the world size 1"),
            std::string::npos)
      << read_text(log);
  EXPECT_NE(run_program(EMBER_TRAIN_BERT_PARALLEL_PATH, "--device cpu --sequence-parallel", log), 0);
  EXPECT_NE(read_text(log).find("--sequence-parallel needs --tensor-parallel > 1"), std::string::npos)
      << read_text(log);
}

}  // namespace
}  // namespace ember::testing
