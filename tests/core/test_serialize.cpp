#include <sys/resource.h>
#include <unistd.h>

#include <cctype>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "ember/core/crc32c.h"
#include "ember/core/serialize.h"
#include "test_util.h"

namespace ember::testing {

namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// Same dtype, shape and bytes (NaN payloads and -0 included).
::testing::AssertionResult same_bytes(const Tensor& actual, const Tensor& expected) {
  if (actual.dtype() != expected.dtype() || !actual.sizes().equals(expected.sizes()))
    return ::testing::AssertionFailure() << actual.dtype() << " " << actual.sizes() << " vs "
                                         << expected.dtype() << " " << expected.sizes();
  Tensor a = actual.contiguous(), e = expected.contiguous();
  if (a.nbytes() > 0 && std::memcmp(a.data_ptr(), e.data_ptr(), a.nbytes()) != 0)
    return ::testing::AssertionFailure() << "bytes differ: " << actual << " vs " << expected;
  return ::testing::AssertionSuccess();
}

StateDict load_buffer(const std::vector<uint8_t>& b) { return load_from_buffer(b.data(), b.size()); }

// A file with this header text and data section, the length prefix filled in.
std::vector<uint8_t> raw_file(const std::string& json, const std::string& data = "") {
  std::string b(8, '\0');
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(json.size() >> (8 * i));
  b += json;
  b += data;
  return {b.begin(), b.end()};
}

std::string fixture(const std::string& name) { return std::string(EMBER_TEST_FIXTURES) + "/" + name; }

// Every dtype, with 0-dim, empty and non-contiguous tensors among them.
OrderedDict<Tensor> all_kinds() {
  OrderedDict<Tensor> d;
  for (ScalarType t : {kFloat64, kFloat32, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kBool}) {
    std::string n(to_string(t));
    d.insert(n + ".matrix", random_tensor({3, 5}, t, 0, 100));
    d.insert(n + ".scalar", random_tensor({}, t, 0, 100));
    d.insert(n + ".empty", random_tensor({0, 3}, t));
    d.insert(n + ".transposed", random_tensor({4, 3}, t, 0, 100).t());
    d.insert(n + ".strided", non_contiguous(random_tensor({2, 3}, t, 0, 100)));
  }
  d.insert("special", tensor({0.0, -0.0, std::numeric_limits<double>::infinity(),
                              std::numeric_limits<double>::quiet_NaN(), 5e-324},
                             kFloat64));
  return d;
}

}  // namespace

TEST(Crc32c, KnownAnswers) {
  // RFC 3720 (iSCSI) B.4 test vectors, and the "123456789" check value of CRC-32C.
  const char* digits = "123456789";
  EXPECT_EQ(crc32c(digits, 9), 0xE3069283u);
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
  std::vector<uint8_t> b(32, 0);
  EXPECT_EQ(crc32c(b.data(), b.size()), 0x8A9136AAu);
  std::fill(b.begin(), b.end(), 0xFF);
  EXPECT_EQ(crc32c(b.data(), b.size()), 0x62A8AB43u);
  for (int i = 0; i < 32; ++i) b[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(crc32c(b.data(), b.size()), 0x46DD794Eu);
  for (int i = 0; i < 32; ++i) b[i] = static_cast<uint8_t>(31 - i);
  EXPECT_EQ(crc32c(b.data(), b.size()), 0x113FDB5Cu);
}

TEST(Crc32c, MatchesBitwiseDefinitionAndContinues) {
  // The slicing-by-8 loop against the textbook one-bit-at-a-time definition, at every length
  // and alignment around the 8-byte step.
  auto bitwise = [](const uint8_t* p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; ++i) {
      c ^= p[i];
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1) ? 0x82F63B78u : 0);
    }
    return ~c;
  };
  std::vector<uint8_t> b(64);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 131 + 7);
  for (size_t start = 0; start < 8; ++start)
    for (size_t n = 0; start + n <= b.size(); ++n)
      ASSERT_EQ(crc32c(b.data() + start, n), bitwise(b.data() + start, n));
  EXPECT_EQ(crc32c(b.data() + 13, 51, crc32c(b.data(), 13)), crc32c(b.data(), 64));
}

TEST(Serialize, RoundTripsEveryDtypeAndLayout) {
  OrderedDict<Tensor> d = all_kinds();
  std::map<std::string, std::string> meta = {{"epoch", "3"},
                                             {"lr", "0.10000000000000001"},
                                             {"", "empty key"},
                                             {"quote\"and\\slash\n", "\x01\xc3\xa9\xf0\x9f\x94\xa5"}};
  TempDir dir;
  save(d, dir.file("a.safetensors"), meta);
  std::vector<uint8_t> buffer = save_to_buffer(d, meta);
  EXPECT_EQ(read_bytes(dir.file("a.safetensors")), buffer);
  for (const StateDict& s : {load(dir.file("a.safetensors")), load_buffer(buffer)}) {
    EXPECT_EQ(s.tensors.keys(), d.keys());  // the caller's order, not the data section's
    EXPECT_EQ(s.metadata, meta);            // the checksums are not handed back
    for (const auto& [name, t] : d) {
      EXPECT_TRUE(same_bytes(s.tensors[name], t)) << name;
      EXPECT_TRUE(s.tensors[name].is_contiguous());
    }
  }
  // A StateDict saves as its tensors plus metadata.
  StateDict sd{d, meta};
  save(sd, dir.file("b.safetensors"));
  EXPECT_EQ(read_bytes(dir.file("b.safetensors")), buffer);
  // Nothing at all.
  StateDict none = load_buffer(save_to_buffer({}));
  EXPECT_TRUE(none.tensors.empty());
  EXPECT_TRUE(none.metadata.empty());
}

TEST(Serialize, WritesTheSafetensorsLayout) {
  OrderedDict<Tensor> d;
  d.insert("h", tensor({1.0, 2.0, 3.0}, kFloat16));  // 6 bytes: goes after the 4-byte one
  d.insert("w", tensor({{1.5f}, {-2.0f}}));
  std::vector<uint8_t> b = save_to_buffer(d, {{"k", "v"}});
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(b[i]) << (8 * i);
  ASSERT_EQ(n % 8, 0u);  // the data section starts 8-byte aligned
  ASSERT_EQ(b.size(), 8 + n + 8 + 6);
  std::string json(b.begin() + 8, b.begin() + 8 + static_cast<long>(n));
  // CRC-32C of the little-endian bytes: f16 1, 2, 3 = 00 3c 00 40 00 42; f32 1.5, -2 = 00 00 c0 3f 00 00 00
  // c0.
  const uint8_t hb[] = {0x00, 0x3c, 0x00, 0x40, 0x00, 0x42};
  const uint8_t wb[] = {0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x00, 0xc0};
  char hc[9], wc[9];
  std::snprintf(hc, sizeof hc, "%08x", crc32c(hb, 6));
  std::snprintf(wc, sizeof wc, "%08x", crc32c(wb, 8));
  // The header's own checksum is of the header bytes with its 8 digits as zeros.
  std::string expected = std::string("{\"__metadata__\":{\"ember.data.crc32c.h\":\"") + hc +
                         "\",\"ember.data.crc32c.w\":\"" + wc +
                         "\",\"ember.header.crc32c\":\"00000000\",\"k\":\"v\"},"
                         "\"h\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[8,14]},"
                         "\"w\":{\"dtype\":\"F32\",\"shape\":[2,1],\"data_offsets\":[0,8]}}";
  expected.append((8 - expected.size() % 8) % 8, ' ');  // padded with spaces
  char header_crc[9];
  std::snprintf(header_crc, sizeof header_crc, "%08x", crc32c(expected.data(), expected.size()));
  expected.replace(expected.find("00000000"), 8, header_crc);
  EXPECT_EQ(json, expected);
  EXPECT_EQ(std::memcmp(b.data() + 8 + n, wb, 8), 0);
  EXPECT_EQ(std::memcmp(b.data() + 8 + n + 8, hb, 6), 0);
}

TEST(Serialize, ReadsAFileWrittenByPython) {
  // Written by safetensors 0.8.0 (torch 2.x):
  //   import torch; from safetensors.torch import save_file
  //   t = {"f64": torch.tensor([[1.5, -2.25], [3.0, 1e-300]], dtype=torch.float64),
  //        "f32": torch.arange(6, dtype=torch.float32).reshape(2, 3) / 4,
  //        "f16": torch.tensor([0.5, -65504.0, 6.1035e-05], dtype=torch.float16),
  //        "bf16": torch.tensor([1.0, -3.140625, 1e30], dtype=torch.bfloat16),
  //        "i64": torch.tensor([-(2**62), 7, 2**40]),
  //        "i32": torch.tensor([[-2147483648], [2147483647]], dtype=torch.int32),
  //        "u8": torch.tensor([0, 128, 255], dtype=torch.uint8),
  //        "bool": torch.tensor([True, False, True]), "scalar": torch.tensor(2.5),
  //        "empty": torch.zeros(0, 4), "layer.0.weight": torch.tensor([[1.0, 2.0]]).t()}
  //   save_file(t, "python_all_dtypes.safetensors", metadata={"format": "pt", "note": "caf\u00e9"})
  StateDict s = load(fixture("python_all_dtypes.safetensors"));
  EXPECT_EQ(s.metadata, (std::map<std::string, std::string>{{"format", "pt"}, {"note", "caf\xc3\xa9"}}));
  // Python orders the header by alignment, then name; load keeps the header's order.
  EXPECT_EQ(s.tensors.keys(), (std::vector<std::string>{"i64", "f64", "empty", "f32", "layer.0.weight",
                                                        "scalar", "i32", "bf16", "f16", "u8", "bool"}));
  const OrderedDict<Tensor>& t = s.tensors;
  EXPECT_TRUE(same_bytes(t["f64"], tensor({{1.5, -2.25}, {3.0, 1e-300}}, kFloat64)));
  EXPECT_TRUE(same_bytes(t["f32"], tensor({{0.0f, 0.25f, 0.5f}, {0.75f, 1.0f, 1.25f}})));
  // torch: x.view(torch.int16).tolist() gave [14336, -1025, 1024] (f16) and [16256, -16311, 29002] (bf16).
  EXPECT_EQ(t["f16"].dtype(), kFloat16);
  EXPECT_EQ(t["f16"].sizes().vec(), std::vector<int64_t>{3});
  const auto* h = static_cast<const uint16_t*>(t["f16"].data_ptr());
  EXPECT_EQ(h[0], 14336);
  EXPECT_EQ(h[1], static_cast<uint16_t>(-1025));
  EXPECT_EQ(h[2], 1024);
  const auto* bf = static_cast<const uint16_t*>(t["bf16"].data_ptr());
  EXPECT_EQ(t["bf16"].dtype(), kBFloat16);
  EXPECT_EQ(bf[0], 16256);
  EXPECT_EQ(bf[1], static_cast<uint16_t>(-16311));
  EXPECT_EQ(bf[2], 29002);
  EXPECT_TRUE(same_bytes(t["i64"], tensor({-(int64_t(1) << 62), int64_t(7), int64_t(1) << 40}, kInt64)));
  EXPECT_TRUE(same_bytes(t["i32"], tensor({{-2147483648LL}, {2147483647LL}}, kInt32)));
  EXPECT_TRUE(same_bytes(t["u8"], tensor({0, 128, 255}, kUInt8)));
  EXPECT_TRUE(same_bytes(t["bool"], tensor({true, false, true})));
  EXPECT_TRUE(same_bytes(t["scalar"], tensor(2.5f)));
  EXPECT_TRUE(same_bytes(t["empty"], zeros({0, 4})));
  EXPECT_TRUE(same_bytes(t["layer.0.weight"], tensor({{1.0f}, {2.0f}})));
}

namespace {

// a: f32 [2, 3] at [16, 40]; b: i64 [2] at [0, 16] (wider first); m: bool [3] at [40, 43].
OrderedDict<Tensor> small_dict() {
  OrderedDict<Tensor> d;
  d.insert("a", arange(6, kFloat32).view({2, 3}));
  d.insert("b", tensor({int64_t(-1), int64_t(5)}));
  d.insert("m", tensor({true, false, true}));
  return d;
}

uint64_t header_size(const std::vector<uint8_t>& b) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(b[i]) << (8 * i);
  return n;
}

}  // namespace

TEST(Serialize, TruncationIsReportedWhereverTheFileEnds) {
  std::vector<uint8_t> full = save_to_buffer(small_dict());
  const size_t n = header_size(full), data = 8 + n;
  ASSERT_EQ(full.size(), data + 43);
  auto cut = [&](size_t size) {
    return std::vector<uint8_t>(full.begin(), full.begin() + static_cast<long>(size));
  };
  for (size_t size : {size_t(0), size_t(5)})
    EXPECT_EMBER_ERROR(load_buffer(cut(size)), "load_from_buffer", "truncated",
                       "fewer than the 8-byte header length");
  const std::string length = "header length is " + std::to_string(n) + " bytes";
  for (size_t size : {size_t(8), size_t(8 + n / 2), data - 1})
    EXPECT_EMBER_ERROR(load_buffer(cut(size)), "load_from_buffer", "truncated: the", length.c_str());
  // In the data: the first tensor (in header order) whose bytes are missing is named.
  EXPECT_EMBER_ERROR(load_buffer(cut(data)), "tensor \"a\"",
                     "data_offsets [16, 40] run past the end of the data (0 bytes)", "truncated");
  EXPECT_EMBER_ERROR(load_buffer(cut(data + 20)), "tensor \"a\"", "(20 bytes)", "truncated");
  EXPECT_EMBER_ERROR(load_buffer(cut(data + 42)), "tensor \"m\"", "data_offsets [40, 43]", "(42 bytes)",
                     "truncated");
  // The same through a file, whose path is named.
  TempDir dir;
  write_bytes(dir.file("t.safetensors"), cut(data + 42));
  EXPECT_EMBER_ERROR(load(dir.file("t.safetensors")), "load: \"", "t.safetensors\"", "tensor \"m\"",
                     "truncated");
  write_bytes(dir.file("t.safetensors"), cut(3));
  EXPECT_EMBER_ERROR(load(dir.file("t.safetensors")), "t.safetensors\"", "truncated: 3 bytes");
}

TEST(Serialize, AFlippedDataByteFailsTheChecksumOfItsTensor) {
  std::vector<uint8_t> full = save_to_buffer(small_dict());
  const size_t data = 8 + header_size(full);
  // b [0, 16], a [16, 40]: flip a bit in each; m's bytes are flipped 1 -> 0 (still a valid bool).
  for (auto [offset, name] :
       {std::pair<size_t, const char*>{3, "tensor \"b\""}, {39, "tensor \"a\""}, {42, "tensor \"m\""}}) {
    std::vector<uint8_t> bad = full;
    bad[data + offset] ^= 1;
    EXPECT_EMBER_ERROR(load_buffer(bad), "load_from_buffer", name, "checksum mismatch",
                       "the data is corrupt");
  }
  TempDir dir;
  std::vector<uint8_t> bad = full;
  bad[data + 20] ^= 0x80;
  write_bytes(dir.file("c.safetensors"), bad);
  EXPECT_EMBER_ERROR(load(dir.file("c.safetensors")), "c.safetensors\"", "tensor \"a\"", "checksum mismatch");
}

TEST(Serialize, RejectsMalformedHeaderJson) {
  const std::string f = R"("dtype":"F32","shape":[1],"data_offsets":[0,4])";
  struct Case {
    std::string json;
    std::vector<const char*> parts;
  };
  std::vector<Case> cases = {
      {"", {"header JSON", "expected '{', the header ends"}},
      {"[]", {"header JSON", "expected '{'", "header byte 0"}},
      {"{\"a\":{" + f + "}", {"header JSON", "expected ',' or '}', the header ends"}},
      {"{\"a\" {" + f + "}}", {"header JSON", "expected ':'"}},
      {"{\"a\":{" + f + "},}", {"header JSON", "expected a string"}},
      {"{\"a\":{" + f + "}} x", {"unexpected content after the header object"}},
      {"{\"a\":{" + f + ",}}", {"tensor \"a\"", "expected a string"}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,4]}}",
       {"tensor \"a\"", "shape: expected an integer"}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}",
       {"tensor \"a\"", "shape: expected a non-negative integer"}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}",
       {"shape: integer with a leading zero"}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[9223372036854775808],\"data_offsets\":[0,4]}}",
       {"shape: integer larger than 2^63 - 1"}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}",
       {"data_offsets has more than 2 entries"}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4]}}",
       {"data_offsets has 1 entries, expected 2"}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,\"4\"]}}",
       {"data_offsets: expected a non-negative"}},
      {"{\"a\":{" + f + ",\"foo\":1}}", {"tensor \"a\"", "unknown field \"foo\""}},
      {R"({"a":{"dtype":"F32","shape":[1]}})", {"tensor \"a\"", "missing field \"data_offsets\""}},
      {R"({"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
       {"field \"dtype\" appears twice"}},
      {"{\"a\":{" + f + "},\"a\":{" + f + "}}", {"tensor \"a\"", "appears twice in the header"}},
      {R"({"__metadata__":{"k":"v","k":"w"}})", {"__metadata__", "duplicate key \"k\""}},
      {R"({"__metadata__":{},"__metadata__":{}})", {"__metadata__", "appears twice"}},
      {R"({"__metadata__":{"k":1}})", {"__metadata__", "expected a string"}},
      {R"({"__metadata__":{"k":"a\qb"}})", {"bad escape '\\q'"}},
      {"{\"__metadata__\":{\"k\":\"a\x01\"}}", {"control character in a string"}},
      {"{\"__metadata__\":{\"k\":\"\xff\"}}", {"not valid UTF-8"}},
      {"{\"__metadata__\":{\"k\":\"\xc0\xaf\"}}", {"not valid UTF-8"}},  // overlong '/'
      {R"({"__metadata__":{"k":"\udc00"}})", {"lone low surrogate"}},
      {R"({"__metadata__":{"k":"\ud800x"}})", {"high surrogate without its low half"}},
      {R"({"__metadata__":{"k":"\u12"}})", {"bad hex digit"}},
      {R"({"__metadata__":{"k":"abc)", {"unterminated string"}},
      {R"({"a":{"dtype":"I16","shape":[2],"data_offsets":[0,4]}})",
       {"tensor \"a\"", "unsupported dtype \"I16\"", "F64, F32, F16, BF16, I64, I32, U8, BOOL"}},
      {R"({"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", {"tensor \"a\"", "expected a string"}},
  };
  std::string many_dims = "{\"a\":{\"dtype\":\"U8\",\"shape\":[1";
  for (int i = 0; i < 64; ++i) many_dims += ",1";
  cases.push_back(
      {many_dims + "],\"data_offsets\":[0,1]}}", {"tensor \"a\"", "shape has more than 64 dims"}});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json);
    try {
      load_buffer(raw_file(c.json, "xxxx"));
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_EQ(msg.rfind("load_from_buffer: ", 0), 0u) << msg;
      for (const char* part : c.parts)
        EXPECT_NE(msg.find(part), std::string::npos) << msg << " lacks " << part;
    }
  }
  // Escapes decode, and padding after the object is fine.
  StateDict s =
      load_buffer(raw_file("{\"__metadata__\":{\"k\\n\":\"\\u00e9\\ud83d\\udd25\\\"\\/\"}}  \t\n\r  "));
  EXPECT_EQ(s.metadata.at("k\n"), "\xc3\xa9\xf0\x9f\x94\xa5\"/");
}

TEST(Serialize, RejectsInconsistentOffsetsAndSizes) {
  auto entry = [](const char* name, const char* dtype, const char* shape, uint64_t b, uint64_t e) {
    return std::string("\"") + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
           ",\"data_offsets\":[" + std::to_string(b) + "," + std::to_string(e) + "]}";
  };
  auto load_json_data = [](const std::string& body, const std::string& data) {
    std::string json = "{";
    json += body;
    json += '}';
    return load_buffer(raw_file(json, data));
  };
  auto load_json = [&](const std::string& body, size_t zeros) {
    return load_json_data(body, std::string(zeros, '\0'));
  };
  EXPECT_EMBER_ERROR(load_json(entry("a", "F32", "[2]", 0, 8) + "," + entry("b", "F32", "[2]", 4, 12), 12),
                     "tensor \"b\": data_offsets [4, 12] overlap tensor \"a\" data_offsets [0, 8]");
  EXPECT_EMBER_ERROR(load_json(entry("a", "F32", "[1]", 0, 4) + "," + entry("b", "F32", "[1]", 8, 12), 12),
                     "tensor \"b\"", "4 unused bytes before its data_offsets [8, 12]");
  EXPECT_EMBER_ERROR(load_json(entry("a", "F32", "[1]", 0, 4), 8), "4 bytes after the last tensor's data");
  EXPECT_EMBER_ERROR(load_json("", 3), "3 bytes after the last tensor's data");
  EXPECT_EMBER_ERROR(load_json(entry("a", "F32", "[1]", 8, 4), 8), "tensor \"a\"",
                     "data_offsets [8, 4] end before they begin");
  EXPECT_EMBER_ERROR(load_json(entry("a", "F32", "[3]", 0, 8), 8), "tensor \"a\"",
                     "shape [3] of F32 needs 12 bytes, but data_offsets [0, 8] hold 8");
  EXPECT_EMBER_ERROR(load_json(entry("a", "F32", "[4294967296,4294967296]", 0, 8), 8), "tensor \"a\"",
                     "shape [4294967296, 4294967296] is too large (its sizes multiply past 2^63 - 1)");
  // Zero elements, but a view's strides would still overflow.
  EXPECT_EMBER_ERROR(load_json(entry("a", "F32", "[0,4294967296,4294967296]", 0, 0), 0), "is too large");
  EXPECT_EMBER_ERROR(load_json(entry("a", "F64", "[4611686018427387904]", 0, 8), 8), "tensor \"a\"",
                     "needs more than 2^64 bytes");
  EXPECT_EMBER_ERROR(load_json(entry("m", "BOOL", "[3]", 0, 3), 0), "tensor \"m\"", "truncated");
  EXPECT_EMBER_ERROR(load_json_data(entry("m", "BOOL", "[3]", 0, 3), std::string("\1\2\0", 3)),
                     "tensor \"m\"", "BOOL element 1 is 2, expected 0 or 1");
  // Zero-size tensors may sit anywhere, even at the same offset.
  StateDict s = load_json(entry("e", "F32", "[0,3]", 4, 4) + "," + entry("a", "I32", "[1]", 0, 4) + "," +
                              entry("f", "F64", "[0]", 4, 4),
                          4);
  EXPECT_EQ(s.tensors.keys(), (std::vector<std::string>{"e", "a", "f"}));
  EXPECT_EQ(s.tensors["e"].sizes().vec(), (std::vector<int64_t>{0, 3}));
}

TEST(Serialize, RejectsBadHeaderLengthsAndChecksumEntries) {
  std::vector<uint8_t> huge(16, 0xFF);
  EXPECT_EMBER_ERROR(load_buffer(huge),
                     "load_from_buffer: header length 18446744073709551615 exceeds the limit");
  std::vector<uint8_t> short_header = raw_file("{}");
  short_header[0] = 100;
  EXPECT_EMBER_ERROR(load_buffer(short_header),
                     "truncated: the header length is 100 bytes but only 2 follow");
  EXPECT_EMBER_ERROR(load_from_buffer(nullptr, 5), "load_from_buffer", "data is null");

  // The checksum keys of files written before the header checksum, which still load.
  const std::string a = R"("a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]})";
  const std::string b = R"("b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]})";
  auto with_meta = [&](const std::string& meta) {
    return load_buffer(raw_file("{\"__metadata__\":{" + meta + "}," + a + "," + b + "}", "AB"));
  };
  const std::string crc_a = "\"ember.crc32c.a\":\"" + [] {
    char h[9];
    std::snprintf(h, sizeof h, "%08x", crc32c("A", 1));
    return std::string(h);
  }() + "\"";
  const std::string crc_b = "\"ember.crc32c.b\":\"" + [] {
    char h[9];
    std::snprintf(h, sizeof h, "%08x", crc32c("B", 1));
    return std::string(h);
  }() + "\"";
  StateDict ok = with_meta(crc_a + "," + crc_b + ",\"x\":\"y\"");
  EXPECT_EQ(ok.metadata, (std::map<std::string, std::string>{{"x", "y"}}));
  EXPECT_EMBER_ERROR(with_meta(crc_a),
                     "tensor \"b\": no checksum (\"ember.data.crc32c.b\") while other tensors have one");
  EXPECT_EMBER_ERROR(with_meta(crc_a + "," + crc_b + ",\"ember.crc32c.zz\":\"00000000\""),
                     "\"ember.crc32c.zz\" is the checksum of no tensor");
  EXPECT_EMBER_ERROR(with_meta(crc_a + ",\"ember.crc32c.b\":\"XYZ\""),
                     "\"ember.crc32c.b\" is \"XYZ\", expected 8 lowercase hex digits");
  EXPECT_EMBER_ERROR(with_meta(crc_b + ",\"ember.crc32c.a\":\"00000000\""), "tensor \"a\"",
                     "checksum mismatch");
}

TEST(Serialize, TheHeaderChecksumCoversEveryHeaderByte) {
  // A metadata value of the length that leaves padding after the JSON.
  std::vector<uint8_t> good;
  std::string json, step;
  while (json.empty() || json.back() != ' ') {
    step += '7';
    good = save_to_buffer(small_dict(), {{"step", step}});
    json.assign(good.begin() + 8, good.begin() + 8 + static_cast<long>(header_size(good)));
  }
  auto with_json = [&](const std::string& j) {
    std::vector<uint8_t> b = good;
    std::copy(j.begin(), j.end(), b.begin() + 8);
    return b;
  };
  // A shape and its offsets edited consistently, so the data checks alone would pass.
  std::string edited = json;
  const std::string shape = "\"shape\":[2,3]";
  size_t at = edited.find(shape);
  ASSERT_NE(at, std::string::npos);
  edited.replace(at, shape.size(), "\"shape\":[3,2]");
  EXPECT_EMBER_ERROR(load_buffer(with_json(edited)), "load_from_buffer: header checksum mismatch",
                     "the header is corrupt");
  std::string padded = json;
  padded.back() = '\t';  // valid JSON whitespace instead of a padding space
  EXPECT_EMBER_ERROR(load_buffer(with_json(padded)), "header checksum mismatch");
  // The header checksum's key damaged: the data checksums say it must be there.
  std::string no_key = json;
  no_key.replace(no_key.find("ember.header"), 12, "ember.haader");
  EXPECT_EMBER_ERROR(load_buffer(with_json(no_key)), "has data checksums but no \"ember.header.crc32c\"",
                     "the header is corrupt");
  std::string spaced = json;
  const std::string key = "\"ember.header.crc32c\":";
  spaced.replace(spaced.find(key), key.size(), "\"ember.header.crc32c\" :");
  spaced.pop_back();  // the same length: one padding space fewer
  EXPECT_EMBER_ERROR(load_buffer(with_json(spaced)),
                     "\"ember.header.crc32c\" is not written as save() writes it");
  EXPECT_EQ(load_buffer(good).metadata, (std::map<std::string, std::string>{{"step", step}}));
}

// A checkpoint of every dtype and layout, corrupted 1,000 ways: each is an ember::Error (any
// other exception or a crash fails the test too), never tensors that differ from the saved ones.
TEST(Serialize, EveryCorruptionOfASavedFileIsDetected) {
  OrderedDict<Tensor> d = all_kinds();
  d.insert("weight", randn({64, 64}));
  const std::vector<uint8_t> good = save_to_buffer(d, {{"epoch", "3"}});
  const size_t n = header_size(good);
  std::mt19937_64 rng(20261204);
  auto below = [&](size_t k) { return static_cast<size_t>(rng() % k); };
  std::vector<size_t> digits;  // where the header has a digit
  for (size_t i = 8; i < 8 + n; ++i)
    if (std::isdigit(good[i])) digits.push_back(i);
  const char* kinds[] = {"a byte anywhere", "a header byte", "a truncation", "a header digit"};
  for (int trial = 0; trial < 1000; ++trial) {
    std::vector<uint8_t> bad = good;
    const int kind = trial % 4;
    size_t at = 0;
    if (kind == 0 || kind == 1) {
      at = below(kind == 0 ? good.size() : 8 + n);
      bad[at] ^= static_cast<uint8_t>(1 + below(255));
    } else if (kind == 2) {
      at = below(good.size());
      bad.resize(at);
    } else {
      at = digits[below(digits.size())];
      bad[at] = static_cast<uint8_t>('0' + (bad[at] - '0' + 1 + below(9)) % 10);
    }
    bool detected = false;
    try {
      load_buffer(bad);
    } catch (const Error&) {
      detected = true;
    }
    EXPECT_TRUE(detected) << "trial " << trial << ": " << kinds[kind] << " at byte " << at << " (header: 8 + "
                          << n << " bytes) was not detected";
  }
}

TEST(Serialize, SaveRejectsBadInputBeforeTouchingTheFile) {
  TempDir dir;
  OrderedDict<Tensor> d;
  d.insert("w", ones({2}));
  for (const char* key : {"ember.crc32c.w", "ember.data.crc32c.w", "ember.header.crc32c"})
    EXPECT_EMBER_ERROR(save(d, dir.file("x"), {{key, "0"}}), "save: metadata key \"", key, "reserved");
  EXPECT_EMBER_ERROR(save(d, dir.file("x"), {{"k", "\xff"}}),
                     "save: metadata entry \"k\" is not valid UTF-8");
  OrderedDict<Tensor> bad_name;
  bad_name.insert("bad\xc3", ones({1}));
  EXPECT_EMBER_ERROR(save(bad_name, dir.file("x")), "save: tensor name", "not valid UTF-8");
  OrderedDict<Tensor> u;
  u.insert("u", Tensor());
  EXPECT_EMBER_ERROR(save(u, dir.file("x")), "save: tensor \"u\" is undefined");
  OrderedDict<Tensor> m;
  m.insert("__metadata__", ones({1}));
  EXPECT_EMBER_ERROR(save_to_buffer(m), "save_to_buffer: \"__metadata__\" cannot name a tensor");
  EXPECT_EQ(dir.count(), 0u);
  EXPECT_EMBER_ERROR(save(d, dir.file("no/such/dir/x")), "save: cannot create", "no/such/dir/x.tmp.",
                     "No such file or directory");
}

TEST(Serialize, AFailedSaveLeavesTheOriginalFile) {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  OrderedDict<Tensor> small;
  small.insert("w", arange(4, kFloat32));
  save(small, path);
  const std::vector<uint8_t> before = read_bytes(path);

  // The write fails half-way (a file size limit, as a full disk would): the original stays and
  // the temporary file is gone.
  OrderedDict<Tensor> big;
  big.insert("w", zeros({1 << 20}));
  rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit lim = old;
  lim.rlim_cur = 64 << 10;
  auto prev_handler = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
  EXPECT_EMBER_ERROR(save(big, path), "save: cannot write", "ckpt.safetensors.tmp.", "File too large");
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, prev_handler);
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(dir.count(), 1u);

  // Renaming onto a directory fails: nothing is left behind either.
  fs::create_directory(dir.file("d"));
  fs::create_directory(dir.file("d/inner"));
  EXPECT_EMBER_ERROR(save(small, dir.file("d")), "save: cannot rename", "to \"");
  EXPECT_EQ(dir.count(), 2u);

  // A successful save replaces the file as a whole.
  save(big, path);
  EXPECT_TRUE(same_bytes(load(path).tensors["w"], zeros({1 << 20})));
  EXPECT_EQ(dir.count(), 2u);
}

TEST(Serialize, LoadReportsUnreadablePaths) {
  TempDir dir;
  EXPECT_EMBER_ERROR(load(dir.file("missing.safetensors")), "load: \"", "missing.safetensors\": cannot open",
                     "No such file or directory");
  EXPECT_EMBER_ERROR(load(dir.path()), "not a regular file");
}

}  // namespace ember::testing
