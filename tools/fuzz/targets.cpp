#include "ember/tools/fuzz/targets.h"

#include <stdlib.h>  // mkdtemp

#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "ember/core/serialize.h"
#include "ember/data/cifar.h"
#include "ember/data/csv.h"
#include "ember/data/idx.h"
#include "ember/data/image_decode.h"
#include "ember/examples/models/bert_config.h"
#include "ember/text/tokenizer_config.h"
#include "ember/text/vocab.h"

namespace ember::fuzz {

namespace {

// The readers that take a path read the input from a file in this folder, one per process
// (so libFuzzer's -fork and -jobs workers do not share it), removed at exit.
class InputFolder {
 public:
  InputFolder() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ember-fuzz-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("fuzz: cannot make a temp folder " + tmpl);
    path_ = tmpl;
  }
  ~InputFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

  // Not an ember::Error: a failed write is the machine's fault, not the input's.
  std::string write(const uint8_t* bytes, size_t size, const std::string& name) const {
    std::string file = path_ + "/" + name;
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes), static_cast<std::streamsize>(size));
    if (!out.flush()) throw std::runtime_error("fuzz: cannot write " + file);
    return file;
  }

 private:
  std::string path_;
};

const InputFolder& input_folder() {
  static const InputFolder folder;
  return folder;
}

bool same(const StateDict& a, const StateDict& b) {
  if (a.metadata != b.metadata || a.tensors.keys() != b.tensors.keys()) return false;
  for (const auto& [name, t] : a.tensors) {
    const Tensor& u = b.tensors[name];
    if (t.dtype() != u.dtype() || !t.sizes().equals(u.sizes())) return false;
    if (t.nbytes() > 0 && std::memcmp(t.data_ptr(), u.data_ptr(), t.nbytes()) != 0) return false;
  }
  return true;
}

// What loads must also survive a save and a reload unchanged.
void read_safetensors(const uint8_t* bytes, size_t size) {
  StateDict loaded = load_from_buffer(bytes, size);
  std::vector<uint8_t> saved = save_to_buffer(loaded.tensors, loaded.metadata);
  if (!same(loaded, load_from_buffer(saved.data(), saved.size())))
    throw std::logic_error("safetensors: a save and a reload changed what was loaded");
}

// Plain or gzip-compressed, as open_file tells them apart.
void read_idx(const uint8_t* bytes, size_t size) {
  data::read_idx(input_folder().write(bytes, size, "input-idx3-ubyte"));
}

// The same records as CIFAR-10's test batch (one label byte) and CIFAR-100's (two).
void read_cifar(const uint8_t* bytes, size_t size) {
  input_folder().write(bytes, size, "test_batch.bin");
  input_folder().write(bytes, size, "test.bin");
  try {
    data::CIFAR10(input_folder().path(), /*train=*/false);
  } catch (const Error&) {
    // rejected as CIFAR-10: it may still be CIFAR-100
  }
  data::CIFAR100(input_folder().path(), /*train=*/false);
}

void read_csv(const uint8_t* bytes, size_t size) {
  data::parse_csv(std::string(reinterpret_cast<const char*>(bytes), size), "input.csv");
}

void read_vocab(const uint8_t* bytes, size_t size) {
  text::Vocab::from_file(input_folder().write(bytes, size, "vocab.txt"));
}

void read_tokenizer_config(const uint8_t* bytes, size_t size) {
  text::read_tokenizer_config(input_folder().write(bytes, size, "tokenizer_config.json"));
}

void read_bert_config(const uint8_t* bytes, size_t size) {
  models::BertConfig::from_file(input_folder().write(bytes, size, "config.json"));
}

// The decoders, not decode_image: its [H, W, 3] -> [3, H, W] copy is no reader's work, and slow
// in the fuzzers' unoptimized libember on the large images a small file may declare.
void read_png(const uint8_t* bytes, size_t size) { data::decode_png({bytes, bytes + size}, "input.png"); }

void read_jpeg(const uint8_t* bytes, size_t size) { data::decode_jpeg({bytes, bytes + size}, "input.jpg"); }

}  // namespace

const std::vector<Target>& targets() {
  static const std::vector<Target> all = {
      {"safetensors", read_safetensors},
      {"idx", read_idx},
      {"cifar", read_cifar},
      {"csv", read_csv},
      {"vocab", read_vocab},
      {"tokenizer_config", read_tokenizer_config},
      {"bert_config", read_bert_config},
      {"png", read_png},
      {"jpeg", read_jpeg},
  };
  return all;
}

const Target& target(const std::string& name) {
  std::string names;
  for (const Target& t : targets()) {
    if (t.name == name) return t;
    names += (names.empty() ? "" : ", ") + std::string(t.name);
  }
  throw Error("fuzz: no target \"" + name + "\" (the targets: " + names + ")");
}

}  // namespace ember::fuzz
