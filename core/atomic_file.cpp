#include "ember/core/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "ember/core/error.h"

namespace ember {

namespace {

// Small pieces (a header, small tensors) gather in a buffer; large ones go straight out.
constexpr size_t kBufferSize = 1 << 20;

std::string errno_message(int err) { return std::generic_category().message(err); }

// Removes "<path>.tmp.<pid>.<n>" files left by processes that are gone (killed mid-save).
// Best effort: a directory that cannot be listed is left as it is.
void remove_stale_temporaries(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const std::string prefix = p.filename().string() + ".tmp.";
  std::error_code ec;
  fs::directory_iterator it(p.parent_path().empty() ? fs::path(".") : p.parent_path(), ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const std::string rest = name.substr(prefix.size());
    char* stop = nullptr;
    const long pid = std::strtol(rest.c_str(), &stop, 10);
    if (stop == rest.c_str() || *stop != '.' || pid <= 0 || pid == getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)
      continue;  // still running, or not ours to judge
    std::error_code ignored;
    fs::remove(it->path(), ignored);
  }
}

}  // namespace

AtomicFile::AtomicFile(std::string path, std::string op) : path_(std::move(path)), op_(std::move(op)) {
  remove_stale_temporaries(path_);
  static std::atomic<uint64_t> counter{0};  // unique names for concurrent saves in one process
  do {
    tmp_ = detail::str_cat(path_, ".tmp.", getpid(), ".", counter.fetch_add(1));
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  } while (fd_ < 0 && errno == EEXIST);
  EMBER_CHECK(fd_ >= 0, op_, ": cannot create \"", tmp_, "\": ", errno_message(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, size_t size) {
  if (buffer_.size() + size > kBufferSize) flush();
  if (size >= kBufferSize) {
    write_fully(static_cast<const char*>(data), size);
  } else {
    buffer_.append(static_cast<const char*>(data), size);
  }
}

void AtomicFile::commit() {
  flush();
  EMBER_CHECK(::fsync(fd_) == 0, op_, ": cannot fsync \"", tmp_, "\": ", errno_message(errno));
  int fd = fd_;
  fd_ = -1;
  EMBER_CHECK(::close(fd) == 0, op_, ": cannot close \"", tmp_, "\": ", errno_message(errno));
  EMBER_CHECK(::rename(tmp_.c_str(), path_.c_str()) == 0, op_, ": cannot rename \"", tmp_, "\" to \"", path_,
              "\": ", errno_message(errno));
  committed_ = true;
  // The rename is durable only once the directory entry is on disk.
  std::string dir = std::filesystem::path(path_).parent_path().string();
  if (dir.empty()) dir = ".";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  EMBER_CHECK(dfd >= 0, op_, ": wrote \"", path_,
              "\" but cannot open its directory to fsync it: ", errno_message(errno));
  int rc = ::fsync(dfd);
  int err = errno;
  ::close(dfd);
  EMBER_CHECK(rc == 0, op_, ": wrote \"", path_, "\" but cannot fsync its directory: ", errno_message(err));
}

void AtomicFile::flush() {
  write_fully(buffer_.data(), buffer_.size());
  buffer_.clear();
}

void AtomicFile::write_fully(const char* p, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    EMBER_CHECK(n > 0, op_, ": cannot write \"", tmp_, "\": ", errno_message(n < 0 ? errno : EIO));
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void write_file_atomically(const std::string& path, std::string_view contents, const std::string& op) {
  AtomicFile file(path, op);
  file.write(contents.data(), contents.size());
  file.commit();
}

}  // namespace ember
