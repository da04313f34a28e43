#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "ember/core/error.h"
#include "ember/text/tokenizer_config.h"

namespace ember::text {

namespace {

using nlohmann::json;

// One key's value, checked: errors name the file and the key.
class Reader {
 public:
  Reader(const std::string& path, const json& j) : path_(path), j_(j) {}

  const json* find(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }

  void read(const char* key, bool* out) const {
    if (const json* v = find(key)) {
      check(v->is_boolean(), key, "a boolean", *v);
      *out = v->get<bool>();
    }
  }

  void read(const char* key, std::optional<bool>* out) const {
    if (const json* v = find(key); v && !v->is_null()) {
      check(v->is_boolean(), key, "a boolean or null", *v);
      *out = v->get<bool>();
    }
  }

  // A special token: a string, or an AddedToken object {"content": "...", ...}.
  void read(const char* key, std::string* out) const {
    const json* v = find(key);
    if (!v || v->is_null()) return;
    if (v->is_object() && v->contains("content")) v = &(*v)["content"];
    check(v->is_string(), key, "a string or an object with a string \"content\"", *v);
    *out = v->get<std::string>();
  }

  void read(const char* key, std::vector<std::string>* out) const {
    const json* v = find(key);
    if (!v || v->is_null()) return;
    check(v->is_array(), key, "a list of strings or null", *v);
    for (const json& s : *v) {
      check(s.is_string(), key, "a list of strings or null", *v);
      out->push_back(s.get<std::string>());
    }
  }

  // Hugging Face writes int(1e30) for "no limit": larger than any int64, read as no limit.
  void read(const char* key, int64_t* out) const {
    const json* v = find(key);
    if (!v || v->is_null()) return;
    check(v->is_number(), key, "a positive integer", *v);
    if (v->is_number_float() ? v->get<double>() >= 9.2e18
                             : v->is_number_unsigned() && v->get<uint64_t>() > INT64_MAX) {
      return;
    }
    check(v->is_number_integer() && v->get<int64_t>() > 0, key, "a positive integer", *v);
    *out = v->get<int64_t>();
  }

  void check(bool ok, const char* key, const char* expected, const json& v) const {
    EMBER_CHECK(ok, "read_tokenizer_config: ", path_, ": key \"", key, "\" must be ", expected, ", got ",
                v.dump());
  }

 private:
  const std::string& path_;
  const json& j_;
};

}  // namespace

bool has_nlohmann_json() { return true; }

TokenizerConfig read_tokenizer_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in, "read_tokenizer_config: cannot open ", path, ": ", std::strerror(errno));
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    // A parse_error says the line and column; a number too large for a double is an out_of_range.
    throw Error(detail::str_cat("read_tokenizer_config: ", path, " is not valid JSON: ", e.what()));
  }
  EMBER_CHECK(j.is_object(), "read_tokenizer_config: ", path, " must hold a JSON object, got ",
              j.type_name());
  const Reader r(path, j);
  bool do_basic_tokenize = true;
  r.read("do_basic_tokenize", &do_basic_tokenize);
  EMBER_CHECK(do_basic_tokenize, "read_tokenizer_config: ", path,
              ": key \"do_basic_tokenize\" is false, which BertTokenizer does not support");
  TokenizerConfig c;
  r.read("do_lower_case", &c.do_lower_case);
  r.read("strip_accents", &c.strip_accents);
  r.read("tokenize_chinese_chars", &c.tokenize_chinese_chars);
  r.read("never_split", &c.never_split);
  r.read("model_max_length", &c.model_max_length);
  r.read("unk_token", &c.unk_token);
  r.read("sep_token", &c.sep_token);
  r.read("pad_token", &c.pad_token);
  r.read("cls_token", &c.cls_token);
  r.read("mask_token", &c.mask_token);
  return c;
}

}  // namespace ember::text
