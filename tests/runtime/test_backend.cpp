// Device backends: allocator accounting, streams and the stream guard, events, copies, and graph
// capture/replay (CUDA) behind the one DeviceBackend interface.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compile/ops/ops.h"
#include "runtime/backend/backend.h"
#include "runtime/check.h"
#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

// Allocations raise current and peak bytes; freeing lowers current, keeps peak.
void check_allocator_accounting(Device device) {
  Allocator& allocator = backend(device).allocator(device.index);
  allocator.reset_peak();
  MemoryStats before = allocator.stats();
  {
    Tensor a = Tensor::empty({1 << 20}, DType::f32, device);  // 4 MiB
    MemoryStats during = allocator.stats();
    EXPECT_GE(during.current_bytes, before.current_bytes + (4u << 20));
    EXPECT_GE(during.peak_bytes, during.current_bytes);
    EXPECT_GE(during.reserved_bytes, during.current_bytes);
  }
  MemoryStats after = allocator.stats();
  EXPECT_EQ(after.current_bytes, before.current_bytes);
  EXPECT_GE(after.peak_bytes, before.current_bytes + (4u << 20));
}

bool gpu(Device* device) {
  if (first_gpu(device)) return true;
  return false;
}

}  // namespace

TEST(Backend, CpuAllocatorAccountsBytes) {
  check_allocator_accounting(kCPU);
}

TEST(Backend, CpuStreamsEventsAndNoCapture) {
  DeviceBackend& cpu = backend(kCPU);
  auto stream = cpu.create_stream(0);
  Stream* default_stream = &cpu.current_stream(0);
  {
    StreamGuard guard(*stream);
    EXPECT_EQ(&cpu.current_stream(0), stream.get());
  }
  EXPECT_EQ(&cpu.current_stream(0), default_stream);
  auto start = cpu.create_event(0), end = cpu.create_event(0);
  start->record(*stream);
  end->record(*stream);
  EXPECT_GE(start->elapsed_ms(*end), 0.0f);
  EXPECT_FALSE(cpu.supports_graphs());
  EXPECT_THROW(cpu.begin_capture(*stream), Error);
}

TEST(Backend, MissingDeviceIsAClearError) {
  try {
    Tensor::empty({4}, DType::f32, Device{DeviceType::cuda, 63});
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), ::testing::HasSubstr("cuda:63"));
  }
}

TEST(GpuBackend, CachingAllocatorReusesBlocksAndAccountsBytes) {
  Device device;
  if (!gpu(&device)) GTEST_SKIP() << "no GPU device is available";
  check_allocator_accounting(device);
  Allocator& allocator = backend(device).allocator(device.index);
  { Tensor warm = Tensor::empty({1 << 20}, DType::f32, device); }
  size_t device_allocations = allocator.stats().num_device_allocations;
  for (int i = 0; i < 10; ++i) Tensor again = Tensor::empty({1 << 20}, DType::f32, device);
  EXPECT_EQ(allocator.stats().num_device_allocations, device_allocations);  // served from cache
  allocator.empty_cache();
  EXPECT_EQ(allocator.stats().reserved_bytes, allocator.stats().current_bytes);
}

TEST(GpuBackend, StreamsEventsAndCopies) {
  Device device;
  if (!gpu(&device)) GTEST_SKIP() << "no GPU device is available";
  DeviceBackend& gpu_backend = backend(device);
  auto stream = gpu_backend.create_stream(device.index);
  Tensor host = random_tensor({1000, 257}, 7);
  Tensor result;
  auto start = gpu_backend.create_event(device.index), end = gpu_backend.create_event(device.index);
  {
    StreamGuard guard(*stream);
    start->record(*stream);
    Tensor on_device = host.to(device);  // several MB: the pinned staging path on the way back
    result = ops::mul_scalar(on_device, 3.0).to(kCPU);
    end->record(*stream);
    end->synchronize();
  }
  EXPECT_GT(start->elapsed_ms(*end), 0.0f);
  EXPECT_LT(relative_error(result, ops::mul_scalar(host, 3.0)), 1e-7);
}

TEST(GpuBackend, CapturedGraphReplaysWithNewInputs) {
  Device device;
  if (!gpu(&device)) GTEST_SKIP() << "no GPU device is available";
  DeviceBackend& gpu_backend = backend(device);
  ASSERT_TRUE(gpu_backend.supports_graphs());
  auto stream = gpu_backend.create_stream(device.index);
  Tensor x = random_tensor({64, 512}, 1).to(device);
  Tensor w = random_tensor({512}, 2).to(device);
  Tensor out = Tensor::empty({64, 512}, DType::f32, device);
  // The intermediates stay alive (as the compiled arena does): a replay writes to the addresses
  // captured, so they must not be handed to other tensors in between.
  Tensor sum, product, activated;
  auto work = [&] {
    sum = ops::add(x, w);
    product = ops::mul(sum, x);
    activated = ops::silu(product);
    out.copy_from(activated);
  };
  std::unique_ptr<GraphExec> graph;
  {
    StreamGuard guard(*stream);
    work();  // warm-up: allocator blocks and library handles exist before capture
    gpu_backend.begin_capture(*stream);
    work();
    graph = gpu_backend.end_capture(*stream);
  }
  EXPECT_GT(graph->num_nodes(), 0u);
  for (uint32_t seed : {3u, 4u}) {
    Tensor new_x = random_tensor({64, 512}, seed);
    x.copy_from(new_x.to(device));  // same address, new values
    graph->replay(*stream);
    stream->synchronize();
    Tensor want = ops::silu(ops::mul(ops::add(new_x, w.to(kCPU)), new_x));
    EXPECT_LT(relative_error(out.to(kCPU), want), 1e-6) << "seed " << seed;
  }
}
