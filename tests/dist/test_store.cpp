// TCPStore and PrefixStore: semantics, blocking across threads and processes, atomic adds,
// timeouts and their messages, a dead server.
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <thread>

#include "dist_test_util.h"

namespace ember::testing::dist {
namespace {

using distributed::PrefixStore;
using distributed::Store;
using distributed::TCPStore;
using Clock = std::chrono::steady_clock;

int64_t elapsed_ms(Clock::time_point since) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - since).count();
}

std::unique_ptr<TCPStore> master(milliseconds timeout = milliseconds(10'000)) {
  return std::make_unique<TCPStore>("127.0.0.1", 0, std::nullopt, true, timeout);
}

std::unique_ptr<TCPStore> client(const TCPStore& m, milliseconds timeout = milliseconds(10'000)) {
  return std::make_unique<TCPStore>("127.0.0.1", m.port(), std::nullopt, false, timeout);
}

// Workers for the cross-process tests: they reach the test's store through MASTER_PORT.
TCPStore worker_store() {
  return TCPStore("127.0.0.1", env_int("MASTER_PORT"), std::nullopt, false, milliseconds(10'000));
}

DIST_WORKER(store_setter) {
  TCPStore store = worker_store();
  std::this_thread::sleep_for(milliseconds(200));
  store.set("from_process", "hello from " + std::to_string(getpid()));
}

DIST_WORKER(store_adder) {
  TCPStore store = worker_store();
  for (int i = 0; i < 200; ++i) store.add("counter", 1);
}

// Hosts a store, says its port in PORT_FILE, then sleeps until killed.
DIST_WORKER(store_server) {
  TCPStore store("127.0.0.1", 0, std::nullopt, true);
  write_file(std::getenv("PORT_FILE"), std::to_string(store.port()));
  std::this_thread::sleep_for(std::chrono::seconds(60));
}

TEST(TCPStore, SetGetAddCheckDeleteNumKeys) {
  auto m = master();
  auto c = client(*m);
  EXPECT_GT(m->port(), 0);
  EXPECT_EQ(c->port(), m->port());
  EXPECT_TRUE(m->is_master());
  EXPECT_FALSE(c->is_master());
  EXPECT_EQ(m->num_keys(), 0);
  m->set("a", "1");
  c->set("b", std::string("\0bin\xff", 5));  // values are bytes
  EXPECT_EQ(c->get("a"), "1");
  EXPECT_EQ(m->get("b"), std::string("\0bin\xff", 5));
  c->set("a", "overwritten");
  EXPECT_EQ(m->get("a"), "overwritten");
  EXPECT_EQ(m->num_keys(), 2);
  EXPECT_TRUE(c->check({"a", "b"}));
  EXPECT_FALSE(c->check({"a", "nope"}));
  EXPECT_EQ(c->add("n", 5), 5);
  EXPECT_EQ(m->add("n", -7), -2);
  EXPECT_EQ(c->get("n"), "-2");  // counters are decimal strings, as in PyTorch
  EXPECT_EQ(m->num_keys(), 3);
  EXPECT_TRUE(c->delete_key("n"));
  EXPECT_FALSE(c->delete_key("n"));
  EXPECT_FALSE(m->check({"n"}));
  EXPECT_EQ(m->num_keys(), 2);
  EXPECT_EQ(m->add("n", 0), 0);  // absent counts as 0
  c->set("empty", "");
  EXPECT_EQ(m->get("empty"), "");
  std::string big(3 << 20, 'x');  // larger than a socket buffer
  big[12345] = 'y';
  c->set("big", big);
  EXPECT_EQ(m->get("big"), big);
}

TEST(TCPStore, CompareSet) {
  auto m = master();
  // Absent key and empty expected: set.
  EXPECT_EQ(m->compare_set("k", "", "v1"), "v1");
  // Wrong expected: unchanged, returns the current value.
  EXPECT_EQ(m->compare_set("k", "other", "v2"), "v1");
  EXPECT_EQ(m->get("k"), "v1");
  EXPECT_EQ(m->compare_set("k", "v1", "v2"), "v2");
  EXPECT_EQ(m->get("k"), "v2");
  // Absent key and non-empty expected: nothing set, returns expected (PyTorch's behaviour).
  EXPECT_EQ(m->compare_set("absent", "e", "d"), "e");
  EXPECT_FALSE(m->check({"absent"}));
}

TEST(TCPStore, AddToANonIntegerIsAnError) {
  auto m = master();
  m->set("s", "abc");
  EXPECT_EMBER_ERROR(m->add("s", 1), "TCPStore: add", "key 's' holds 'abc', not an integer");
  EXPECT_EQ(m->add("t", 2), 2);  // the connection is still usable
}

TEST(TCPStore, BlockingGetAcrossThreads) {
  auto m = master();
  auto c = client(*m);
  std::string got;
  int64_t waited = 0;
  auto start = Clock::now();
  std::thread reader([&] {
    got = c->get("late");
    waited = elapsed_ms(start);
  });
  std::this_thread::sleep_for(milliseconds(150));
  m->set("late", "value");
  reader.join();
  EXPECT_EQ(got, "value");
  EXPECT_GE(waited, 140);
}

TEST(TCPStore, OneStoreServesManyThreads) {
  // A get blocked in one thread must not hold up a set through the same store object.
  auto m = master();
  std::string got;
  std::thread reader([&] { got = m->get("x"); });
  std::this_thread::sleep_for(milliseconds(50));
  m->set("x", "from the same object");
  reader.join();
  EXPECT_EQ(got, "from the same object");
}

TEST(TCPStore, WaitAcrossThreads) {
  auto m = master();
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    m->wait({"p", "q"});
    done = true;
  });
  m->set("p", "1");
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_FALSE(done);  // q is still missing
  m->set("q", "2");
  waiter.join();
  EXPECT_TRUE(done);
}

TEST(TCPStore, BlockingGetAcrossProcesses) {
  TempDir dir;
  auto m = master();
  Process p({self_exe(), "--worker", "store_setter"}, {{"MASTER_PORT", std::to_string(m->port())}},
            dir.file("setter.log"));
  auto start = Clock::now();
  std::string v = m->get("from_process");
  EXPECT_GE(elapsed_ms(start), 150);
  EXPECT_EQ(v, "hello from " + std::to_string(p.pid()));
  EXPECT_EQ(p.wait(milliseconds(10'000)), 0) << p.output();
}

TEST(TCPStore, AddIsAtomicAcrossClientsAndProcesses) {
  TempDir dir;
  auto m = master();
  std::vector<Process> procs;
  for (int i = 0; i < 2; ++i)
    procs.emplace_back(std::vector<std::string>{self_exe(), "--worker", "store_adder"},
                       Env{{"MASTER_PORT", std::to_string(m->port())}},
                       dir.file("adder" + std::to_string(i)));
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      auto c = client(*m);
      for (int i = 0; i < 200; ++i) c->add("counter", 1);
    });
  }
  for (auto& t : threads) t.join();
  for (auto& p : procs) EXPECT_EQ(p.wait(milliseconds(20'000)), 0) << p.output();
  EXPECT_EQ(m->add("counter", 0), 5 * 200);
}

TEST(TCPStore, TimeoutsNameTheKeyAndTheServer) {
  auto m = master(milliseconds(100));
  std::string server = "127.0.0.1:" + std::to_string(m->port());
  auto start = Clock::now();
  std::string in_parens = "(server " + server + ")";
  EXPECT_EMBER_ERROR(m->wait({"x"}, milliseconds(100)), "TCPStore: wait for key 'x' timed out after 100 ms",
                     in_parens.c_str());
  EXPECT_GE(elapsed_ms(start), 90);
  EXPECT_LT(elapsed_ms(start), 2000);
  EXPECT_EMBER_ERROR(m->get("missing"), "TCPStore: get: wait for key 'missing' timed out after 100 ms",
                     server.c_str());
  m->set("a", "1");
  EXPECT_EMBER_ERROR(m->wait({"a", "b", "c"}, milliseconds(50)),
                     "wait for keys 'b', 'c' timed out after 50 ms");
  // The store's own timeout applies to wait without one.
  EXPECT_EMBER_ERROR(m->wait({"z"}), "key 'z' timed out after 100 ms");
  // kNoTimeout waits as long as it takes.
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(200));
    m->set("slow", "ok");
  });
  m->wait({"slow"}, Store::kNoTimeout);
  setter.join();
  m->set_timeout(Store::kNoTimeout);
  EXPECT_EQ(m->get("slow"), "ok");
}

TEST(TCPStore, ConnectRetriesUntilTheServerComesUp) {
  int port = free_port();
  std::unique_ptr<TCPStore> c;
  std::thread t(
      [&] { c = std::make_unique<TCPStore>("127.0.0.1", port, std::nullopt, false, milliseconds(10'000)); });
  std::this_thread::sleep_for(milliseconds(300));
  TCPStore m("127.0.0.1", port, std::nullopt, true);
  t.join();
  m.set("k", "v");
  EXPECT_EQ(c->get("k"), "v");
}

TEST(TCPStore, NoServerGivesAnErrorAfterTheTimeout) {
  int port = free_port();
  auto start = Clock::now();
  std::string expected = "TCPStore: could not connect to 127.0.0.1:" + std::to_string(port);
  EXPECT_EMBER_ERROR(TCPStore("127.0.0.1", port, std::nullopt, false, milliseconds(300)), expected.c_str(),
                     "Connection refused");
  EXPECT_GE(elapsed_ms(start), 250);
  EXPECT_LT(elapsed_ms(start), 3000);
}

TEST(TCPStore, MasterWaitsForWorkers) {
  int port = free_port();
  std::thread worker([&] {
    std::this_thread::sleep_for(milliseconds(100));
    TCPStore w("127.0.0.1", port, 2, false, milliseconds(5000));
  });
  auto start = Clock::now();
  TCPStore m("127.0.0.1", port, 2, true, milliseconds(5000));
  EXPECT_GE(elapsed_ms(start), 80);
  worker.join();
  EXPECT_EQ(m.num_keys(), 0);  // the join bookkeeping is not counted
  EXPECT_EMBER_ERROR(TCPStore("127.0.0.1", 0, 3, true, milliseconds(200)),
                     "TCPStore: only 1 of 3 processes joined within 200 ms");
  // Without waiting, the master returns at once.
  TCPStore lone("127.0.0.1", 0, 3, true, milliseconds(200), false);
}

TEST(TCPStore, DeadServerGivesAnErrorNotAHang) {
  TempDir dir;
  std::string port_file = dir.file("port");
  Process server({self_exe(), "--worker", "store_server"}, {{"PORT_FILE", port_file}},
                 dir.file("server.log"));
  auto deadline = Clock::now() + milliseconds(10'000);
  while (read_file(port_file).empty() && Clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(10));
  int port = std::atoi(read_file(port_file).c_str());
  ASSERT_GT(port, 0) << server.output();
  TCPStore c("127.0.0.1", port, std::nullopt, false, milliseconds(60'000));
  c.set("k", "v");
  // A get blocked on the server when it dies returns with an error at once.
  std::string error;
  std::thread blocked([&] {
    try {
      c.get("never");
    } catch (const Error& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(milliseconds(100));
  auto start = Clock::now();
  server.signal(SIGKILL);
  EXPECT_EQ(server.wait(milliseconds(5000)), 128 + SIGKILL);
  blocked.join();
  EXPECT_LT(elapsed_ms(start), 5000);
  std::string server_name = "127.0.0.1:" + std::to_string(port);
  EXPECT_NE(error.find("TCPStore: get of key 'never' failed: server " + server_name + " is gone"),
            std::string::npos)
      << error;
  // The next calls fail within seconds too (the connection is refused after a few retries).
  start = Clock::now();
  EXPECT_EMBER_ERROR(c.get("k"), "TCPStore: get", server_name.c_str());
  EXPECT_EMBER_ERROR(c.set("k", "v"), "TCPStore: set", server_name.c_str());
  EXPECT_LT(elapsed_ms(start), 15'000);
}

TEST(TCPStore, BadArguments) {
  EXPECT_EMBER_ERROR(TCPStore("127.0.0.1", 0, std::nullopt, false),
                     "TCPStore: a client needs the server's port", "got 0");
  EXPECT_EMBER_ERROR(TCPStore("127.0.0.1", 70000, std::nullopt, true),
                     "TCPStore: port 70000 is out of range");
  EXPECT_EMBER_ERROR(TCPStore("127.0.0.1", 0, 0, true), "TCPStore: world_size must be at least 1, got 0");
  auto m = master();
  std::string in_use = "TCPStore: port " + std::to_string(m->port()) + " is in use";
  EXPECT_EMBER_ERROR(TCPStore("127.0.0.1", m->port(), std::nullopt, true), in_use.c_str());
}

TEST(PrefixStore, KeysLiveUnderThePrefix) {
  auto m = master(milliseconds(100));
  auto base = std::shared_ptr<Store>(client(*m));
  PrefixStore a("group_a", base), b("group_b", base);
  a.set("k", "from a");
  b.set("k", "from b");
  EXPECT_EQ(a.get("k"), "from a");
  EXPECT_EQ(b.get("k"), "from b");
  EXPECT_EQ(m->get("group_a/k"), "from a");
  EXPECT_EQ(a.add("n", 3), 3);
  EXPECT_EQ(b.add("n", 1), 1);
  EXPECT_TRUE(a.check({"k", "n"}));
  EXPECT_FALSE(a.check({"other"}));
  EXPECT_EQ(a.compare_set("k", "from a", "new"), "new");
  EXPECT_EQ(m->num_keys(), 4);  // the underlying store's count
  EXPECT_TRUE(a.delete_key("k"));
  EXPECT_EQ(b.get("k"), "from b");
  a.wait({"n"});
  EXPECT_EMBER_ERROR(a.wait({"k"}, milliseconds(50)), "wait for key 'group_a/k' timed out");
  PrefixStore nested("inner", std::make_shared<PrefixStore>("outer", base));
  nested.set("x", "1");
  EXPECT_EQ(m->get("outer/inner/x"), "1");
  EXPECT_EMBER_ERROR(PrefixStore("p", nullptr), "PrefixStore: the underlying store is null");
}

}  // namespace
}  // namespace ember::testing::dist
