#include "text/golden_files.h"

#include <fstream>
#include <sstream>

#include "ember/core/error.h"

namespace ember::testing {

std::string text_fixture(const std::string& name) { return std::string(EMBER_TEXT_FIXTURES) + "/" + name; }

std::string unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out.push_back(s[i]);
      continue;
    }
    const char c = s[++i];
    if (c == 't') {
      out.push_back('\t');
    } else if (c == 'n') {
      out.push_back('\n');
    } else if (c == 'r') {
      out.push_back('\r');
    } else if (c == 'x') {
      EMBER_CHECK(i + 2 < s.size(), "unescape: \\x without two hex digits");
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::vector<std::vector<std::string>> read_tsv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in, "read_tsv: cannot open ", path);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::vector<std::string> fields;
    for (size_t p = 0;;) {
      const size_t q = line.find('\t', p);
      fields.push_back(line.substr(p, q == std::string::npos ? std::string::npos : q - p));
      if (q == std::string::npos) break;
      p = q + 1;
    }
    rows.push_back(std::move(fields));
  }
  return rows;
}

std::vector<int64_t> parse_ids(const std::string& s) {
  std::vector<int64_t> ids;
  std::istringstream in(s);
  for (int64_t id; in >> id;) ids.push_back(id);
  return ids;
}

const GoldenSingle& golden_single() {
  static const GoldenSingle golden = [] {
    GoldenSingle g;
    for (const auto& row : read_tsv(text_fixture("golden_single.tsv"))) {
      EMBER_CHECK(row.size() == 2, "golden_single.tsv: a row of ", row.size(), " fields");
      g.texts.push_back(unescape(row[0]));
      g.ids.push_back(parse_ids(row[1]));
    }
    return g;
  }();
  return golden;
}

const text::BertTokenizer& minilm_tokenizer() {
  static const text::BertTokenizer tokenizer(text::Vocab::from_file(text_fixture("vocab.txt")));
  return tokenizer;
}

}  // namespace ember::testing
