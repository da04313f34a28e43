// tools/bert_tokenize as a user runs it: stdin lines in, Hugging Face's ids out.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "ember/text/unicode.h"
#include "text/golden_files.h"

namespace ember::testing {
namespace {

namespace fs = std::filesystem;

struct CliResult {
  int exit_code;
  std::string out;
};

// Runs bert_tokenize with `args`, `input` on its stdin.
CliResult bert_tokenize(const std::string& args, const std::string& input) {
  const fs::path dir = fs::temp_directory_path() / ("ember_bert_tokenize_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "in.txt", std::ios::binary) << input;
  const std::string cmd = std::string(EMBER_BERT_TOKENIZE_PATH) + " " + args + " < " +
                          (dir / "in.txt").string() + " > " + (dir / "out.txt").string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  std::stringstream out;
  out << std::ifstream(dir / "out.txt").rdbuf();
  fs::remove_all(dir);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out.str()};
}

std::string joined(const std::vector<int64_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s;
}

TEST(BertTokenizeCli, PrintsHuggingFaceIdsPerLine) {
  if (!text::has_utf8proc()) GTEST_SKIP() << "ember built without utf8proc";
  const GoldenSingle& g = golden_single();
  std::string input, expected;
  int lines = 0;
  for (size_t i = 0; i < g.texts.size() && lines < 50; i += 37) {
    if (g.texts[i].find_first_of("\r\n") != std::string::npos) continue;  // one line each
    input += g.texts[i] + "\n";
    expected += joined(g.ids[i]) + "\n";
    ++lines;
  }
  const std::string args = "--vocab " + text_fixture("vocab.txt");
  CliResult r = bert_tokenize(args, input);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, expected);

  r = bert_tokenize(args + " --max-length 5 --pair", "hello world, how are you\tfine thanks\n");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "101 7592 102 2986 102\n");
  r = bert_tokenize(args + " --pair", "no tab here\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("stdin line 1 has no tab"), std::string::npos) << r.out;
  r = bert_tokenize("--max-length 3", "");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--vocab is required"), std::string::npos) << r.out;
  r = bert_tokenize("--vocab /nonexistent/vocab.txt", "");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("Vocab: cannot open /nonexistent/vocab.txt"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace ember::testing
