// Streams and events (cuda/stream.h, cuda/event.h), checked without kernels: memsets, copies
// and host functions order the work.
#include <ember/cuda/event.h>
#include <ember/cuda/stream.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "cuda_test_util.h"
#include "host_gate.h"

namespace ember::testing {
namespace {

class CudaStreamTest : public CudaTest {};

// Runs `fn` on a fresh thread, whose current streams are still the defaults.
template <class F>
void on_new_thread(F fn) {
  std::thread t(fn);
  t.join();
}

Tensor gpu_bytes(int64_t n) { return empty({n}, TensorOptions(kUInt8).device(kCUDA)); }

std::vector<unsigned char> to_host(const Tensor& t) {
  std::vector<unsigned char> out(t.nbytes());
  EMBER_CUDA_CHECK(cudaMemcpy(out.data(), t.data_ptr(), t.nbytes(), cudaMemcpyDeviceToHost));
  return out;
}

void CUDART_CB sleep_20ms(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }

TEST_F(CudaStreamTest, EachThreadStartsOnTheDefaultStream) {
  on_new_thread([] {
    cuda::Stream s = cuda::current_stream();
    EXPECT_EQ(s, cuda::default_stream());
    EXPECT_EQ(s.stream(), nullptr);
    EXPECT_EQ(s.device_index(), cuda::current_device());
    EXPECT_EQ(s.device(), Device(kCUDA, cuda::current_device()));
    EXPECT_EQ(cuda::current_stream(0), cuda::default_stream(0));
  });
}

TEST_F(CudaStreamTest, PoolHandsOutStreamsRoundRobin) {
  std::vector<cuda::Stream> low;
  for (int i = 0; i < 32; ++i) low.push_back(cuda::get_stream_from_pool());
  std::set<cudaStream_t> distinct;
  for (const cuda::Stream& s : low) {
    EXPECT_NE(s.stream(), nullptr);
    distinct.insert(s.stream());
  }
  EXPECT_EQ(distinct.size(), 32u);
  EXPECT_EQ(cuda::get_stream_from_pool(), low[0]);  // 32 streams per priority, reused in turn

  int least = 0, greatest = 0;
  EMBER_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cuda::Stream high = cuda::get_stream_from_pool(/*high_priority=*/true);
  EXPECT_EQ(high.priority(), greatest);
  EXPECT_EQ(low[0].priority(), least);
  EXPECT_EQ(distinct.count(high.stream()), 0u);
  unsigned flags = 0;
  EMBER_CUDA_CHECK(cudaStreamGetFlags(high, &flags));
  EXPECT_EQ(flags, unsigned{cudaStreamNonBlocking});
}

TEST_F(CudaStreamTest, SetCurrentStreamIsPerThread) {
  cuda::Stream before = cuda::current_stream();
  cuda::Stream s = cuda::get_stream_from_pool();
  cuda::set_current_stream(s);
  EXPECT_EQ(cuda::current_stream(), s);
  on_new_thread([] { EXPECT_EQ(cuda::current_stream(), cuda::default_stream()); });
  cuda::set_current_stream(before);
  EXPECT_EQ(cuda::current_stream(), before);
}

TEST_F(CudaStreamTest, StreamGuardRestores) {
  cuda::Stream before = cuda::current_stream();
  cuda::Stream s = cuda::get_stream_from_pool();
  {
    cuda::StreamGuard guard(s);
    EXPECT_EQ(cuda::current_stream(), s);
    {
      cuda::StreamGuard inner(cuda::default_stream());
      EXPECT_EQ(cuda::current_stream(), cuda::default_stream());
    }
    EXPECT_EQ(cuda::current_stream(), s);
  }
  EXPECT_EQ(cuda::current_stream(), before);
  if (cuda::device_count() < 2) return;
  // A stream on another device: that device is current inside, both are restored after.
  cuda::set_device(0);
  cuda::Stream other = cuda::get_stream_from_pool(false, 1);
  {
    cuda::StreamGuard guard(other);
    EXPECT_EQ(cuda::current_device(), 1);
    EXPECT_EQ(cuda::current_stream(), other);
  }
  EXPECT_EQ(cuda::current_device(), 0);
  EXPECT_EQ(cuda::current_stream(1), cuda::default_stream(1));
}

TEST_F(CudaStreamTest, EventOrdersWorkAcrossStreams) {
  constexpr int64_t kBytes = 1 << 20;
  Tensor a = gpu_bytes(kBytes), b = gpu_bytes(kBytes);
  EMBER_CUDA_CHECK(cudaMemset(a.data_ptr(), 0, kBytes));
  EMBER_CUDA_CHECK(cudaMemset(b.data_ptr(), 0, kBytes));
  cuda::Stream producer = cuda::get_stream_from_pool(), consumer = cuda::get_stream_from_pool();
  ASSERT_NE(producer, consumer);
  cuda::Event ready;
  {
    HostGate gate(producer);  // holds the memset back
    EMBER_CUDA_CHECK(cudaMemsetAsync(a.data_ptr(), 7, kBytes, producer));
    ready.record(producer);
    ready.wait(consumer);
    // Without the wait, this copy would run now and read zeros.
    EMBER_CUDA_CHECK(cudaMemcpyAsync(b.data_ptr(), a.data_ptr(), kBytes, cudaMemcpyDeviceToDevice, consumer));
    EXPECT_FALSE(ready.query());
    EXPECT_FALSE(consumer.query());
    EXPECT_FALSE(producer.query());
  }
  consumer.synchronize();
  EXPECT_TRUE(ready.query());
  EXPECT_TRUE(consumer.query());
  std::vector<unsigned char> host = to_host(b);
  EXPECT_EQ(std::count(host.begin(), host.end(), 7), kBytes);
}

TEST_F(CudaStreamTest, WaitOnTheCurrentStream) {
  constexpr int64_t kBytes = 4096;
  Tensor a = gpu_bytes(kBytes), b = gpu_bytes(kBytes);
  EMBER_CUDA_CHECK(cudaMemset(b.data_ptr(), 0, kBytes));
  cuda::Stream side = cuda::get_stream_from_pool(), work = cuda::get_stream_from_pool();
  cuda::Event ready;
  {
    HostGate gate(side);
    EMBER_CUDA_CHECK(cudaMemsetAsync(a.data_ptr(), 3, kBytes, side));
    ready.record(side);
    cuda::StreamGuard guard(work);
    ready.wait();  // the current stream: `work`
    EMBER_CUDA_CHECK(cudaMemcpyAsync(b.data_ptr(), a.data_ptr(), kBytes, cudaMemcpyDeviceToDevice,
                                     cuda::current_stream()));
  }
  work.synchronize();
  std::vector<unsigned char> host = to_host(b);
  EXPECT_EQ(std::count(host.begin(), host.end(), 3), kBytes);
}

TEST_F(CudaStreamTest, RecordOnTheCurrentStreamAndSynchronize) {
  cuda::Stream s = cuda::get_stream_from_pool();
  cuda::StreamGuard guard(s);
  cuda::Event done;
  EXPECT_FALSE(done.is_created());
  EXPECT_TRUE(done.query());  // nothing recorded: nothing to wait for
  done.synchronize();
  done.wait();
  {
    HostGate gate(s);
    done.record();  // on `s`, the current stream
    EXPECT_TRUE(done.is_created());
    EXPECT_EQ(done.device_index(), s.device_index());
    EXPECT_FALSE(done.query());
  }
  done.synchronize();
  EXPECT_TRUE(done.query());
  EXPECT_TRUE(s.query());
}

TEST_F(CudaStreamTest, ElapsedTimeCoversTheWorkBetween) {
  cuda::Stream s = cuda::get_stream_from_pool();
  cuda::Event start(/*enable_timing=*/true), end(/*enable_timing=*/true);
  start.record(s);
  EMBER_CUDA_CHECK(cudaLaunchHostFunc(s, &sleep_20ms, nullptr));
  end.record(s);
  float ms = start.elapsed_time(end);  // waits for `end`
  EXPECT_GE(ms, 15.0f);
  EXPECT_LT(ms, 10000.0f);
  EXPECT_GT(start.elapsed_time(end), 0.0f);
}

TEST_F(CudaStreamTest, EventsMove) {
  cuda::Event a(true);
  a.record();
  cuda::Event b = std::move(a);
  EXPECT_FALSE(a.is_created());
  EXPECT_TRUE(b.is_created());
  b.synchronize();
  cuda::Event c;
  c = std::move(b);
  EXPECT_TRUE(c.is_created());
  EXPECT_TRUE(c.query());
}

TEST_F(CudaStreamTest, Errors) {
  cuda::Event untimed, also_untimed;
  untimed.record();
  also_untimed.record();
  EXPECT_EMBER_ERROR(untimed.elapsed_time(also_untimed), "Event::elapsed_time", "enable_timing=true");
  cuda::Event start(true), end(true);
  start.record();
  EXPECT_EMBER_ERROR(start.elapsed_time(end), "Event::elapsed_time", "recorded first");
  int n = cuda::device_count();
  std::string index = "invalid CUDA device index " + std::to_string(n);
  EXPECT_EMBER_ERROR(cuda::current_stream(n), "current_stream", index.c_str());
  EXPECT_EMBER_ERROR(cuda::default_stream(n), "default_stream", index.c_str());
  EXPECT_EMBER_ERROR(cuda::get_stream_from_pool(false, n), "get_stream_from_pool", index.c_str());
  EXPECT_EMBER_ERROR(cuda::set_current_stream(cuda::Stream(n, nullptr)), "set_current_stream", index.c_str());
  if (n < 2) return;
  cuda::Event on0;
  on0.record(cuda::default_stream(0));
  EXPECT_EMBER_ERROR(on0.record(cuda::default_stream(1)), "Event::record", "created on cuda:0",
                     "stream is on cuda:1");
}

}  // namespace
}  // namespace ember::testing
