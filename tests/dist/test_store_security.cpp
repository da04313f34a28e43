// TCPStore as a network service: a store on 127.0.0.1 is not reachable from other interfaces;
// with EMBER_STORE_TOKEN a connection must present the token first or the server hangs up; a
// hostile client (no token, a wrong one, a huge declared length, random bytes, many connections)
// neither crashes the server nor stops it serving the job.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "dist_test_util.h"

namespace ember::testing::dist {
namespace {

using distributed::TCPStore;

// EMBER_STORE_TOKEN set for a scope, the previous value restored after.
class TokenEnv {
 public:
  explicit TokenEnv(const char* token) {
    if (const char* old = std::getenv("EMBER_STORE_TOKEN")) old_ = old;
    setenv("EMBER_STORE_TOKEN", token, 1);
  }
  ~TokenEnv() {
    if (old_)
      setenv("EMBER_STORE_TOKEN", old_->c_str(), 1);
    else
      unsetenv("EMBER_STORE_TOKEN");
  }

 private:
  std::optional<std::string> old_;
};

std::unique_ptr<TCPStore> master() {
  return std::make_unique<TCPStore>("127.0.0.1", 0, std::nullopt, true, milliseconds(10'000));
}

// A plain blocking TCP connection to addr:port, or -1.
int raw_connect(const std::string& addr, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// A request frame as the store's wire format has it: u32 length, command byte, strings.
std::string frame(uint8_t cmd, const std::vector<std::string>& strs) {
  std::string payload(1, static_cast<char>(cmd));
  for (const auto& s : strs) {
    put_u32(payload, static_cast<uint32_t>(s.size()));
    payload += s;
  }
  std::string out;
  put_u32(out, static_cast<uint32_t>(payload.size()));
  return out + payload;
}

// Whether the server closed the connection within `wait` (no reply, then EOF).
bool hung_up(int fd, milliseconds wait = milliseconds(5000)) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return false;
  char buf[64];
  return ::recv(fd, buf, sizeof buf, 0) == 0;
}

constexpr uint8_t kSet = 1, kAuth = 9;

TEST(StoreSecurity, ATokenIsRequiredBeforeAnyRequest) {
  TokenEnv env("job-secret-1234");
  auto m = master();
  TCPStore ok("127.0.0.1", m->port(), std::nullopt, false, milliseconds(10'000));
  ok.set("k", "v");
  EXPECT_EQ(ok.get("k"), "v");

  // Without the token: hung up, and its set never lands.
  int fd = raw_connect("127.0.0.1", m->port());
  ASSERT_GE(fd, 0);
  const std::string evil = frame(kSet, {"evil", "1"});
  ASSERT_EQ(::send(fd, evil.data(), evil.size(), MSG_NOSIGNAL), static_cast<ssize_t>(evil.size()));
  EXPECT_TRUE(hung_up(fd));
  ::close(fd);
  EXPECT_FALSE(m->check({"evil"}));

  // A wrong token, even one a character off: hung up.
  for (const char* wrong : {"job-secret-1235", "job-secret-123", ""}) {
    SCOPED_TRACE(wrong);
    fd = raw_connect("127.0.0.1", m->port());
    const std::string auth = frame(kAuth, {wrong}) + evil;
    ASSERT_EQ(::send(fd, auth.data(), auth.size(), MSG_NOSIGNAL), static_cast<ssize_t>(auth.size()));
    EXPECT_TRUE(hung_up(fd));
    ::close(fd);
  }
  EXPECT_FALSE(m->check({"evil"}));

  // Another job's store client: a clear error, not a hang.
  {
    TokenEnv other("another-job");
    EXPECT_EMBER_ERROR(TCPStore("127.0.0.1", m->port(), std::nullopt, false, milliseconds(3000)),
                       "refused this process's EMBER_STORE_TOKEN");
  }
  ok.set("still", "serving");
  EXPECT_EQ(m->get("still"), "serving");
}

TEST(StoreSecurity, HostileClientsDoNotStopTheServer) {
  auto m = master();
  const int port = m->port();
  // A declared length of 1 GiB (and one just past the limit): refused before any is buffered.
  for (uint32_t n : {1u << 30, (64u << 20) + 1}) {
    int fd = raw_connect("127.0.0.1", port);
    std::string header;
    put_u32(header, n);
    header += "x";
    ASSERT_EQ(::send(fd, header.data(), header.size(), MSG_NOSIGNAL), static_cast<ssize_t>(header.size()));
    EXPECT_TRUE(hung_up(fd)) << n;
    ::close(fd);
  }
  // Random bytes, each on its own connection, closed at once or half-way.
  std::mt19937 rng(11);
  for (int i = 0; i < 300; ++i) {
    int fd = raw_connect("127.0.0.1", port);
    ASSERT_GE(fd, 0);
    std::string junk(std::uniform_int_distribution<int>(1, 64)(rng), '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    if (i % 3 == 0) junk = frame(static_cast<uint8_t>(rng()), {junk});  // well framed, bad content
    (void)::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
    ::close(fd);
  }
  // Many idle connections at once.
  std::vector<int> idle;
  for (int i = 0; i < 200; ++i) idle.push_back(raw_connect("127.0.0.1", port));
  TCPStore c("127.0.0.1", port, std::nullopt, false, milliseconds(10'000));
  c.set("after", "fine");
  EXPECT_EQ(m->get("after"), "fine");
  EXPECT_EQ(c.add("n", 2), 2);
  for (int fd : idle) ::close(fd);
}

// The first IPv4 address of this host that is not loopback, or "".
std::string other_ipv4() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a && found.empty(); a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
    if (std::string(text).rfind("127.", 0) != 0) found = text;
  }
  freeifaddrs(list);
  return found;
}

TEST(StoreSecurity, ALoopbackStoreListensOnLoopbackAlone) {
  const std::string other = other_ipv4();
  if (other.empty()) GTEST_SKIP() << "this machine has no address besides loopback";
  auto loopback = master();
  const int fd = raw_connect(other, loopback->port());
  EXPECT_LT(fd, 0) << "a store on 127.0.0.1 answered on " << other;
  if (fd >= 0) ::close(fd);
  // A store for other nodes (its host is this machine's address) is reachable there.
  TCPStore open(other, 0, std::nullopt, true, milliseconds(10'000));
  const int fd2 = raw_connect(other, open.port());
  EXPECT_GE(fd2, 0);
  if (fd2 >= 0) ::close(fd2);
}

}  // namespace
}  // namespace ember::testing::dist
