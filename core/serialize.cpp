#include "ember/core/serialize.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <unordered_set>

#include "ember/core/atomic_file.h"
#include "ember/core/crc32c.h"
#include "ember/core/factories.h"
#include "ember/core/grad_mode.h"
#include "ember/core/json_string.h"

namespace ember {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian and is copied as is: ember assumes a little-endian host");

namespace {

using detail::str_cat;

constexpr uint64_t kMaxHeaderSize = 100'000'000;  // the Python package's limit
constexpr size_t kMaxDims = 64;
constexpr uint64_t kMaxInt = std::numeric_limits<int64_t>::max();
constexpr std::string_view kMetadataKey = "__metadata__";
// A tensor's CRC-32C is "ember.data.crc32c.<name>"; the header's (of its bytes with those 8
// digits as zeros) is "ember.header.crc32c". Both are written, so one corrupt byte cannot make a
// file pass for one without checksums. Files of ember before the header checksum have
// "ember.crc32c.<name>" alone and still load.
constexpr std::string_view kChecksumPrefix = "ember.data.crc32c.";
constexpr std::string_view kLegacyChecksumPrefix = "ember.crc32c.";
constexpr std::string_view kHeaderChecksum = "ember.header.crc32c";
// As save() writes the entry; inside a JSON string a quote is escaped, so this finds the key itself.
constexpr std::string_view kHeaderChecksumToken = "\"ember.header.crc32c\":\"";

bool is_checksum_key(std::string_view key) {
  return key.starts_with(kChecksumPrefix) || key.starts_with(kLegacyChecksumPrefix) || key == kHeaderChecksum;
}

// The 8 digits of the header checksum in `json`, or npos.
size_t header_checksum_at(std::string_view json) {
  size_t at = json.find(kHeaderChecksumToken);
  return at == std::string_view::npos ? at : at + kHeaderChecksumToken.size();
}

// The header's checksum: of its bytes (padding included) with its own 8 digits as zeros.
uint32_t header_crc(std::string json, size_t digits_at) {
  json.replace(digits_at, 8, 8, '0');
  return crc32c(json.data(), json.size());
}

// Indexed by ScalarType.
constexpr std::string_view kDtypeNames[kNumScalarTypes] = {"BOOL", "U8",   "I32", "I64",
                                                           "F16",  "BF16", "F32", "F64"};

std::string_view dtype_name(ScalarType t) { return kDtypeNames[static_cast<int>(t)]; }

std::optional<ScalarType> dtype_from_name(std::string_view name) {
  for (int i = 0; i < kNumScalarTypes; ++i)
    if (kDtypeNames[i] == name) return static_cast<ScalarType>(i);
  return std::nullopt;
}

std::string hex8(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

std::string errno_message(int err) { return std::generic_category().message(err); }

// The Python reader requires a UTF-8 header; so do we (no overlong forms, no surrogates).
bool is_valid_utf8(std::string_view s) {
  constexpr uint32_t kMinCodePoint[] = {0, 0x80, 0x800, 0x10000};
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t extra;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i <= extra) return false;
    for (size_t k = 1; k <= extra; ++k) {
      auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = cp << 6 | (d & 0x3F);
    }
    if (cp < kMinCodePoint[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Writing

struct Prepared {
  std::string header;        // the 8-byte length and the JSON, padded to 8 bytes
  std::vector<Tensor> data;  // contiguous CPU tensors in the order of the data section
};

// Everything that can fail on bad input fails here, before a file is touched.
Prepared prepare(const char* op, const OrderedDict<Tensor>& tensors,
                 const std::map<std::string, std::string>& metadata) {
  std::map<std::string, std::string> meta;
  for (const auto& [key, value] : metadata) {
    EMBER_CHECK(!is_checksum_key(key), op, ": metadata key \"", key, "\" is reserved for ember's checksums");
    EMBER_CHECK(is_valid_utf8(key) && is_valid_utf8(value), op, ": metadata entry \"", key,
                "\" is not valid UTF-8");
    meta.emplace(key, value);
  }
  NoGradGuard no_grad;
  std::vector<Tensor> cpu;
  for (const auto& [name, t] : tensors) {
    EMBER_CHECK(name != kMetadataKey, op, ": \"__metadata__\" cannot name a tensor (it holds the metadata)");
    EMBER_CHECK(is_valid_utf8(name), op, ": tensor name \"", name, "\" is not valid UTF-8");
    EMBER_CHECK(t.defined(), op, ": tensor \"", name, "\" is undefined");
    Tensor c = t.detach().cpu().contiguous();
    meta[std::string(kChecksumPrefix) + name] = hex8(crc32c(c.data_ptr(), c.nbytes()));
    cpu.push_back(std::move(c));
  }
  meta[std::string(kHeaderChecksum)] = "00000000";

  // Wider dtypes first (as the Python package does): with the data section 8-byte aligned,
  // every tensor then starts aligned to its element size, which memory-mapping readers need.
  std::vector<size_t> order(cpu.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return cpu[a].element_size() > cpu[b].element_size(); });
  std::vector<uint64_t> begin(cpu.size());
  Prepared p;
  uint64_t offset = 0;
  for (size_t i : order) {
    begin[i] = offset;
    offset += cpu[i].nbytes();
    p.data.push_back(cpu[i]);
  }

  // The header lists tensors in the caller's order, which load() returns them in.
  std::string json = "{";
  if (!meta.empty()) {
    json += "\"__metadata__\":{";
    for (const auto& [key, value] : meta) {
      if (json.back() != '{') json += ',';
      append_json_string(json, key);
      json += ':';
      append_json_string(json, value);
    }
    json += '}';
  }
  size_t i = 0;
  for (const auto& [name, t] : tensors) {
    if (json.size() > 1) json += ',';
    append_json_string(json, name);
    json += ":{\"dtype\":\"";
    json += dtype_name(cpu[i].dtype());
    json += "\",\"shape\":[";
    for (int64_t d = 0; d < cpu[i].dim(); ++d) {
      if (d) json += ',';
      json += std::to_string(cpu[i].size(d));
    }
    json += "],\"data_offsets\":[" + std::to_string(begin[i]) + "," +
            std::to_string(begin[i] + cpu[i].nbytes()) + "]}";
    ++i;
  }
  json += '}';
  json.append((8 - json.size() % 8) % 8, ' ');
  size_t digits_at = header_checksum_at(json);
  json.replace(digits_at, 8, hex8(header_crc(json, digits_at)));

  p.header.resize(8);
  for (int b = 0; b < 8; ++b) p.header[b] = static_cast<char>(static_cast<uint64_t>(json.size()) >> (8 * b));
  p.header += json;
  return p;
}

using Sink = std::function<void(const void* data, size_t size)>;

void emit(const Prepared& p, const Sink& sink) {
  sink(p.header.data(), p.header.size());
  for (const Tensor& t : p.data)
    if (t.nbytes() > 0) sink(t.data_ptr(), t.nbytes());
}

// ---------------------------------------------------------------------------------------------
// Reading

struct Entry {
  std::string name;
  ScalarType dtype = kFloat32;
  DimVector shape;
  uint64_t begin = 0, end = 0;
  std::optional<uint32_t> crc;
};

struct Header {
  std::vector<Entry> entries;  // in the header's order
  std::map<std::string, std::string> metadata;
};

// A strict reader for the one JSON shape a safetensors header has: an object of objects whose
// values are strings or arrays of non-negative integers. The nesting depth is fixed by the
// callers (no recursion); the size is bounded by kMaxHeaderSize. Errors name `context_` (the
// tensor or field being read) and the byte where reading stopped.
class JsonReader {
 public:
  JsonReader(std::string_view text, const std::string& where) : s_(text), where_(where) {}

  [[noreturn]] void fail(std::string_view what) const {
    throw Error(str_cat(where_, ": ", context_, ": ", what, " (header byte ", pos_, ")"));
  }
  void set_context(std::string context) { context_ = std::move(context); }

  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool consume(char c) {
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c, std::string_view what) {
    if (!consume(c))
      fail(pos_ < s_.size() ? str_cat("expected ", what) : str_cat("expected ", what, ", the header ends"));
  }
  void expect_end() {
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected content after the header object");
  }

  // Calls on_member(key) for each member; it reads the value.
  template <class F>
  void read_object(F&& on_member) {
    expect('{', "'{'");
    if (consume('}')) return;
    do {
      std::string key = read_string();
      expect(':', "':'");
      on_member(std::move(key));
    } while (consume(','));
    expect('}', "',' or '}'");
  }

  template <class F>
  void read_array(F&& on_item) {
    expect('[', "'['");
    if (consume(']')) return;
    do {
      on_item();
    } while (consume(','));
    expect(']', "',' or ']'");
  }

  std::string read_string() {
    expect('"', "a string");
    std::string out;
    for (;;) {
      if (pos_ >= s_.size()) fail("unterminated string");
      auto c = static_cast<unsigned char>(s_[pos_++]);
      if (c == '"') break;
      if (c < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated string");
      char e = s_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u':
          append_utf8(out, read_code_point());
          break;
        default:
          fail(str_cat("bad escape '\\", e, "' in a string"));
      }
    }
    if (!is_valid_utf8(out)) fail("string is not valid UTF-8");
    return out;
  }

  uint64_t read_uint(std::string_view what) {
    skip_ws();
    if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9')
      fail(str_cat(what, ": expected a non-negative integer"));
    if (s_[pos_] == '0' && pos_ + 1 < s_.size() && s_[pos_ + 1] >= '0' && s_[pos_ + 1] <= '9')
      fail(str_cat(what, ": integer with a leading zero"));
    uint64_t v = 0;
    for (; pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9'; ++pos_) {
      uint64_t d = static_cast<uint64_t>(s_[pos_] - '0');
      if (v > (kMaxInt - d) / 10) fail(str_cat(what, ": integer larger than 2^63 - 1"));
      v = v * 10 + d;
    }
    if (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E'))
      fail(str_cat(what, ": expected an integer"));
    return v;
  }

 private:
  uint32_t read_hex4() {
    if (s_.size() - pos_ < 4) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_++];
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0) fail("bad hex digit in a \\u escape");
      v = v << 4 | static_cast<uint32_t>(d);
    }
    return v;
  }
  uint32_t read_code_point() {
    uint32_t cp = read_hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) fail("lone low surrogate in a \\u escape");
    if (cp < 0xD800 || cp > 0xDBFF) return cp;
    if (s_.size() - pos_ < 2 || s_[pos_] != '\\' || s_[pos_ + 1] != 'u')
      fail("high surrogate without its low half");
    pos_ += 2;
    uint32_t lo = read_hex4();
    if (lo < 0xDC00 || lo > 0xDFFF) fail("high surrogate without its low half");
    return 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
  }
  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | cp >> 6);
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | cp >> 12);
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | cp >> 18);
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
  const std::string& where_;
  std::string context_ = "header JSON";
};

std::string tensor_label(std::string_view name) { return str_cat("tensor \"", name, "\""); }

Entry read_entry(JsonReader& r, std::string name) {
  Entry e;
  e.name = std::move(name);
  const std::string ctx = tensor_label(e.name);
  r.set_context(ctx);
  bool has_dtype = false, has_shape = false, has_offsets = false;
  auto once = [&](bool& seen, std::string_view field) {
    if (seen) r.fail(str_cat("field \"", field, "\" appears twice"));
    seen = true;
  };
  r.read_object([&](std::string field) {
    if (field == "dtype") {
      once(has_dtype, field);
      std::string d = r.read_string();
      std::optional<ScalarType> t = dtype_from_name(d);
      if (!t)
        r.fail(
            str_cat("unsupported dtype \"", d, "\" (ember reads F64, F32, F16, BF16, I64, I32, U8, BOOL)"));
      e.dtype = *t;
    } else if (field == "shape") {
      once(has_shape, field);
      r.read_array([&] {
        if (e.shape.size() == kMaxDims) r.fail(str_cat("shape has more than ", kMaxDims, " dims"));
        e.shape.push_back(static_cast<int64_t>(r.read_uint("shape")));
      });
    } else if (field == "data_offsets") {
      once(has_offsets, field);
      int n = 0;
      r.read_array([&] {
        if (n == 2) r.fail("data_offsets has more than 2 entries");
        (n++ == 0 ? e.begin : e.end) = r.read_uint("data_offsets");
      });
      if (n != 2) r.fail(str_cat("data_offsets has ", n, " entries, expected 2 [begin, end]"));
    } else {
      r.fail(str_cat("unknown field \"", field, "\" (expected dtype, shape, data_offsets)"));
    }
    r.set_context(ctx);
  });
  if (!has_dtype || !has_shape || !has_offsets)
    r.fail(str_cat("missing field \"", !has_dtype ? "dtype" : !has_shape ? "shape" : "data_offsets", "\""));
  return e;
}

uint32_t parse_hex8(const std::string& key, const std::string& value, const std::string& where) {
  bool hex = value.size() == 8 && std::all_of(value.begin(), value.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
             });
  EMBER_CHECK(hex, where, ": __metadata__: \"", key, "\" is \"", value,
              "\", expected 8 lowercase hex digits");
  return static_cast<uint32_t>(std::stoul(value, nullptr, 16));
}

// Verifies and removes the header's checksum. A file with data checksums must have one: without
// it, its key was damaged.
void check_header_checksum(Header& h, std::string_view json, const std::string& where) {
  auto it = h.metadata.find(std::string(kHeaderChecksum));
  if (it == h.metadata.end()) {
    bool data = std::any_of(h.metadata.begin(), h.metadata.end(),
                            [](const auto& kv) { return kv.first.starts_with(kChecksumPrefix); });
    EMBER_CHECK(!data, where, ": __metadata__ has data checksums but no \"", kHeaderChecksum,
                "\": the header is corrupt");
    return;
  }
  uint32_t expected = parse_hex8(it->first, it->second, where);
  size_t at = header_checksum_at(json);
  EMBER_CHECK(at != std::string_view::npos && json.substr(at, 8) == it->second, where, ": \"",
              kHeaderChecksum, "\" is not written as save() writes it: the header is corrupt");
  uint32_t crc = header_crc(std::string(json), at);
  EMBER_CHECK(crc == expected, where, ": header checksum mismatch (crc32c ", hex8(crc), ", the file says ",
              hex8(expected), "): the header is corrupt");
  h.metadata.erase(it);
}

Header parse_header(std::string_view json, const std::string& where) {
  JsonReader r(json, where);
  Header h;
  bool has_metadata = false;
  std::unordered_set<std::string> names;
  r.read_object([&](std::string key) {
    if (key == kMetadataKey) {
      r.set_context("__metadata__");
      if (has_metadata) r.fail("appears twice");
      has_metadata = true;
      r.read_object([&](std::string k) {
        std::string v = r.read_string();
        if (!h.metadata.emplace(k, std::move(v)).second) r.fail(str_cat("duplicate key \"", k, "\""));
      });
    } else {
      if (!names.insert(key).second) {
        r.set_context(tensor_label(key));
        r.fail("appears twice in the header");
      }
      h.entries.push_back(read_entry(r, std::move(key)));
    }
    r.set_context("header JSON");
  });
  r.expect_end();
  check_header_checksum(h, json, where);
  return h;
}

std::string offsets_str(const Entry& e) { return str_cat("data_offsets [", e.begin, ", ", e.end, "]"); }

// Checks the entries against a data section of `data_size` bytes and attaches the checksums.
void validate(Header& h, uint64_t data_size, const std::string& where) {
  for (const Entry& e : h.entries) {
    const std::string ctx = str_cat(where, ": ", tensor_label(e.name), ": ");
    // Every product of sizes (numel, and the strides of any view) must fit in int64.
    uint64_t numel = 1, bound = 1;
    for (int64_t d : e.shape) {
      auto u = static_cast<uint64_t>(d);
      EMBER_CHECK(bound <= kMaxInt / std::max<uint64_t>(u, 1), ctx, "shape ", IntArrayRef(e.shape),
                  " is too large (its sizes multiply past 2^63 - 1)");
      bound *= std::max<uint64_t>(u, 1);
      numel *= u;
    }
    EMBER_CHECK(e.begin <= e.end, ctx, offsets_str(e), " end before they begin");
    EMBER_CHECK(e.end <= data_size, ctx, offsets_str(e), " run past the end of the data (", data_size,
                " bytes): the file is truncated");
    uint64_t nbytes;
    bool overflow = __builtin_mul_overflow(numel, element_size(e.dtype), &nbytes);
    EMBER_CHECK(!overflow && nbytes == e.end - e.begin, ctx, "shape ", IntArrayRef(e.shape), " of ",
                dtype_name(e.dtype), " needs ",
                overflow ? std::string("more than 2^64") : std::to_string(nbytes), " bytes, but ",
                offsets_str(e), " hold ", e.end - e.begin);
  }

  // The data section is tiled exactly, as the Python reader requires: no overlap, no gap.
  std::vector<const Entry*> sorted;
  for (const Entry& e : h.entries) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  const Entry* prev = nullptr;
  for (const Entry* e : sorted) {
    // (begin < covered implies covered > 0, so there is a previous tensor)
    EMBER_CHECK(e->begin >= covered, where, ": ", tensor_label(e->name), ": ", offsets_str(*e), " overlap ",
                tensor_label(prev->name), " ", offsets_str(*prev));
    EMBER_CHECK(e->begin == covered, where, ": ", tensor_label(e->name), ": ", e->begin - covered,
                " unused bytes before its ", offsets_str(*e));
    covered = e->end;
    prev = e;
  }
  EMBER_CHECK(covered == data_size, where, ": ", data_size - covered, " bytes after the last tensor's data (",
              data_size, " bytes of data, the tensors cover ", covered, ")");

  std::unordered_map<std::string_view, Entry*> by_name;
  for (Entry& e : h.entries) by_name.emplace(e.name, &e);
  for (auto it = h.metadata.begin(); it != h.metadata.end();) {
    const auto& [key, value] = *it;
    std::string_view prefix = key.starts_with(kChecksumPrefix)         ? kChecksumPrefix
                              : key.starts_with(kLegacyChecksumPrefix) ? kLegacyChecksumPrefix
                                                                       : std::string_view();
    if (prefix.empty()) {
      ++it;
      continue;
    }
    auto found = by_name.find(std::string_view(key).substr(prefix.size()));
    EMBER_CHECK(found != by_name.end(), where, ": __metadata__: \"", key, "\" is the checksum of no tensor");
    EMBER_CHECK(!found->second->crc, where, ": ", tensor_label(found->first), " has two checksums");
    found->second->crc = parse_hex8(key, value, where);
    it = h.metadata.erase(it);
  }
  bool any =
      std::any_of(h.entries.begin(), h.entries.end(), [](const Entry& e) { return e.crc.has_value(); });
  for (const Entry& e : h.entries)
    EMBER_CHECK(!any || e.crc, where, ": ", tensor_label(e.name), ": no checksum (\"", kChecksumPrefix,
                e.name, "\") while other tensors have one");
}

// Reads `size` bytes at `offset` of the data section into `dst`.
using ReadFn = std::function<void(void* dst, uint64_t offset, size_t size)>;

StateDict read_tensors(Header& h, const ReadFn& read, const std::string& where) {
  StateDict out;
  for (Entry& e : h.entries) {
    Tensor t = empty(e.shape, e.dtype);
    size_t n = e.end - e.begin;
    if (n > 0) read(t.data_ptr(), e.begin, n);
    if (e.crc) {
      uint32_t crc = crc32c(t.data_ptr(), n);
      EMBER_CHECK(crc == *e.crc, where, ": ", tensor_label(e.name), ": checksum mismatch (crc32c ", hex8(crc),
                  ", the file says ", hex8(*e.crc), "): the data is corrupt");
    }
    if (e.dtype == kBool) {
      // Any other byte would be an invalid bool for every kernel that reads it.
      const auto* p = static_cast<const uint8_t*>(t.data_ptr());
      const uint8_t* bad = std::find_if(p, p + n, [](uint8_t b) { return b > 1; });
      EMBER_CHECK(bad == p + n, where, ": ", tensor_label(e.name), ": BOOL element ", bad - p, " is ",
                  static_cast<int>(*bad), ", expected 0 or 1");
    }
    out.tensors.insert(std::move(e.name), std::move(t));
  }
  out.metadata = std::move(h.metadata);
  return out;
}

// The header length from the first 8 bytes of a file of `total` bytes, checked.
uint64_t header_length(const uint8_t* first8, uint64_t total, const std::string& where) {
  uint64_t n = 0;
  for (int b = 0; b < 8; ++b) n |= static_cast<uint64_t>(first8[b]) << (8 * b);
  EMBER_CHECK(n <= kMaxHeaderSize, where, ": header length ", n, " exceeds the limit of ", kMaxHeaderSize,
              " bytes (is this a safetensors file?)");
  EMBER_CHECK(n <= total - 8, where, ": truncated: the header length is ", n, " bytes but only ", total - 8,
              " follow");
  return n;
}

void check_has_length(uint64_t total, const std::string& where) {
  EMBER_CHECK(total >= 8, where, ": truncated: ", total, " bytes, fewer than the 8-byte header length");
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { ::close(fd_); }
  int get() const { return fd_; }

 private:
  int fd_;
};

void pread_fully(int fd, void* dst, size_t size, uint64_t offset, const std::string& where) {
  auto* p = static_cast<char*>(dst);
  while (size > 0) {
    ssize_t n = ::pread(fd, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    EMBER_CHECK(n >= 0, where, ": read failed: ", errno_message(errno));
    EMBER_CHECK(n > 0, where, ": truncated: the file ended at byte ", offset, " while being read");
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

}  // namespace

void save(const OrderedDict<Tensor>& tensors, const std::string& path,
          const std::map<std::string, std::string>& metadata) {
  Prepared p = prepare("save", tensors, metadata);
  AtomicFile file(path);
  emit(p, [&](const void* data, size_t size) { file.write(data, size); });
  file.commit();
}

void save(const StateDict& state, const std::string& path) { save(state.tensors, path, state.metadata); }

std::vector<uint8_t> save_to_buffer(const OrderedDict<Tensor>& tensors,
                                    const std::map<std::string, std::string>& metadata) {
  Prepared p = prepare("save_to_buffer", tensors, metadata);
  std::vector<uint8_t> out;
  emit(p, [&](const void* data, size_t size) {
    const auto* b = static_cast<const uint8_t*>(data);
    out.insert(out.end(), b, b + size);
  });
  return out;
}

StateDict load(const std::string& path) {
  const std::string where = str_cat("load: \"", path, "\"");
  int raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EMBER_CHECK(raw >= 0, where, ": cannot open: ", errno_message(errno));
  Fd fd(raw);
  struct stat st;
  EMBER_CHECK(::fstat(fd.get(), &st) == 0, where, ": cannot stat: ", errno_message(errno));
  EMBER_CHECK(S_ISREG(st.st_mode), where, ": not a regular file");
  auto total = static_cast<uint64_t>(st.st_size);
  check_has_length(total, where);
  uint8_t first8[8];
  pread_fully(fd.get(), first8, 8, 0, where);
  uint64_t n = header_length(first8, total, where);
  std::string json(n, '\0');
  pread_fully(fd.get(), json.data(), n, 8, where);
  Header h = parse_header(json, where);
  validate(h, total - 8 - n, where);
  return read_tensors(
      h,
      [&](void* dst, uint64_t offset, size_t size) {
        pread_fully(fd.get(), dst, size, 8 + n + offset, where);
      },
      where);
}

StateDict load_from_buffer(const uint8_t* data, size_t size) {
  const std::string where = "load_from_buffer";
  EMBER_CHECK(data || size == 0, where, ": data is null but size is ", size);
  check_has_length(size, where);
  uint64_t n = header_length(data, size, where);
  Header h = parse_header(std::string_view(reinterpret_cast<const char*>(data) + 8, n), where);
  validate(h, size - 8 - n, where);
  const uint8_t* section = data + 8 + n;
  return read_tensors(
      h, [&](void* dst, uint64_t offset, size_t len) { std::memcpy(dst, section + offset, len); }, where);
}

}  // namespace ember
