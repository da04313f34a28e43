#pragma once

// The command-line parser of the tools and benchmarks: `--name value` options and `--name`
// switches, registered with the variable each one sets (its value before parse() is the default):
//
//   tools::ArgParser args("ddp_check");
//   args.option("--steps", &a.steps, "training steps").flag("--profile", &a.profile, "print a profile");
//   if (std::optional<int> exit_code = args.parse_or_exit_code(argc, argv)) return *exit_code;
//
// A number is read in full: `--steps 3x` is an error, not 3 as std::atoi gave. A std::vector
// option takes a comma-separated list; the first occurrence replaces the default and later ones
// append, so `--numel 4,8` and `--numel 4 --numel 8` are the same.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include <ember/core/error.h>

namespace ember::tools {

class ArgParser {
 public:
  explicit ArgParser(std::string program) : program_(std::move(program)) {}

  ArgParser& option(const std::string& name, std::string* out, const std::string& help) {
    return add(name, "S", help, *out, [out](std::string_view v) { *out = std::string(v); });
  }
  ArgParser& option(const std::string& name, int* out, const std::string& help) {
    return number(name, out, help);
  }
  ArgParser& option(const std::string& name, int64_t* out, const std::string& help) {
    return number(name, out, help);
  }
  ArgParser& option(const std::string& name, double* out, const std::string& help) {
    return number(name, out, help);
  }
  ArgParser& option(const std::string& name, std::vector<std::string>* out, const std::string& help) {
    return list(name, out, help, [](std::string_view v) { return std::string(v); });
  }
  ArgParser& option(const std::string& name, std::vector<int64_t>* out, const std::string& help) {
    return list(name, out, help,
                [prog = program_, name](std::string_view v) { return to_number<int64_t>(prog, name, v); });
  }
  // A switch without a value: sets *out to true.
  ArgParser& flag(const std::string& name, bool* out, const std::string& help) {
    options_.push_back({name, "", help, "", [out](std::string_view, bool) { *out = true; }});
    return *this;
  }

  // Sets the registered variables from argv[1..]. Returns false after printing usage() to stdout
  // for --help (or -h); throws ember::Error "<program>: ..." on an unknown option, a missing value
  // or a malformed number.
  bool parse(int argc, const char* const* argv) const {
    std::vector<bool> seen(options_.size(), false);
    for (int i = 1; i < argc; ++i) {
      std::string_view arg = argv[i];
      if (arg == "--help" || arg == "-h") {
        std::fputs(usage().c_str(), stdout);
        return false;
      }
      size_t k = 0;
      while (k < options_.size() && options_[k].name != arg) ++k;
      EMBER_CHECK(k < options_.size(), program_, ": unknown option ", arg);
      const Option& o = options_[k];
      std::string_view value;
      if (!o.metavar.empty()) {
        EMBER_CHECK(i + 1 < argc, program_, ": option ", arg, " needs a value");
        value = argv[++i];
      }
      o.set(value, !seen[k]);
      seen[k] = true;
    }
    return true;
  }

  // "usage: <program> [--name N] ... [--switch]" and one line per option: its help and default.
  std::string usage() const {
    std::ostringstream os;
    os << "usage: " << program_;
    size_t width = 0;
    for (const Option& o : options_) {
      os << " [" << o.name << (o.metavar.empty() ? "" : " ") << o.metavar << "]";
      width = std::max(width, o.name.size() + 1 + o.metavar.size());
    }
    os << "\n";
    for (const Option& o : options_) {
      std::string head = o.name + (o.metavar.empty() ? "" : " ") + o.metavar;
      os << "  " << head << std::string(width - head.size() + 2, ' ') << o.help;
      if (!o.default_text.empty()) os << " (default " << o.default_text << ")";
      os << "\n";
    }
    return os.str();
  }

  // parse() for a main() that exits 2 on a bad command line: nullopt to go on, or the code to exit
  // with: 0 after --help, 2 after printing parse()'s error and usage() to stderr.
  std::optional<int> parse_or_exit_code(int argc, const char* const* argv) const {
    try {
      if (parse(argc, argv)) return std::nullopt;
      return 0;
    } catch (const Error& e) {
      return report(e.what());
    }
  }

  // For a program's own checks after parse(): prints "<program>: <msg>" and usage() to stderr and
  // returns 2, the exit code of a bad command line.
  int fail(const std::string& msg) const { return report(program_ + ": " + msg); }

 private:
  struct Option {
    std::string name, metavar, help, default_text;
    std::function<void(std::string_view value, bool first)> set;
  };

  template <class T>
  static T to_number(const std::string& program, const std::string& name, std::string_view v) {
    T x{};
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    EMBER_CHECK(ec == std::errc() && end == v.data() + v.size() && !v.empty(), program, ": option ", name,
                std::is_integral_v<T> ? " needs an integer" : " needs a number",
                ec == std::errc::result_out_of_range ? " in range" : "", ", got '", v, "'");
    return x;
  }

  template <class T>
  ArgParser& number(const std::string& name, T* out, const std::string& help) {
    std::ostringstream def;
    def << *out;
    return add(name, std::is_integral_v<T> ? "N" : "X", help, def.str(),
               [prog = program_, name, out](std::string_view v) { *out = to_number<T>(prog, name, v); });
  }

  template <class T, class Convert>
  ArgParser& list(const std::string& name, std::vector<T>* out, const std::string& help, Convert convert) {
    std::ostringstream def;
    for (size_t i = 0; i < out->size(); ++i) def << (i ? "," : "") << (*out)[i];
    options_.push_back({name, "A,B,..", help, def.str(), [out, convert](std::string_view v, bool first) {
                          if (first) out->clear();
                          for (size_t p = 0; p <= v.size();) {
                            size_t q = std::min(v.find(',', p), v.size());
                            out->push_back(convert(v.substr(p, q - p)));
                            p = q + 1;
                          }
                        }});
    return *this;
  }

  ArgParser& add(const std::string& name, const char* metavar, const std::string& help,
                 const std::string& default_text, std::function<void(std::string_view)> set) {
    options_.push_back({name, metavar, help, default_text, [set](std::string_view v, bool) { set(v); }});
    return *this;
  }

  int report(const std::string& msg) const {
    std::fprintf(stderr, "%s\n%s", msg.c_str(), usage().c_str());
    return 2;
  }

  std::string program_;
  std::vector<Option> options_;
};

}  // namespace ember::tools
