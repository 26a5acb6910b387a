// Tests of devices and device storage that run on every machine: the caching allocator's
// bookkeeping over a fake device, the message for each reason CUDA cannot be used, the no-GPU
// behaviour of this build, and the refusal of the CPU's accessors for a tensor on a device.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/cuda_runtime.hpp"
#include "core/device_allocator.hpp"
#include "kael/core/cuda.hpp"
#include "kael/core/device.hpp"
#include "kael/core/tensor.hpp"

using namespace kael;

namespace {

// Host memory standing in for a device with `capacity` bytes; records every call.
struct FakeDevice {
  std::size_t capacity = 0, in_use = 0;
  int allocations = 0, releases = 0;
  std::map<void*, std::size_t> live;
};

class FakeBackend final : public device_memory::Backend {
 public:
  explicit FakeBackend(FakeDevice& device) : device_(device) {}
  void* allocate(std::size_t bytes) override {
    if (device_.in_use + bytes > device_.capacity) return nullptr;
    void* block = std::malloc(bytes);
    device_.in_use += bytes;
    device_.live[block] = bytes;
    ++device_.allocations;
    return block;
  }
  void release(void* block) override {
    device_.in_use -= device_.live.at(block);
    device_.live.erase(block);
    std::free(block);
    ++device_.releases;
  }
  std::string name() const override { return "fake:0"; }

 private:
  FakeDevice& device_;
};

std::string message_of(auto&& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(DeviceAllocator, RoundsSizes) {
  EXPECT_EQ(device_memory::rounded_size(0), 512u);
  EXPECT_EQ(device_memory::rounded_size(1), 512u);
  EXPECT_EQ(device_memory::rounded_size(512), 512u);
  EXPECT_EQ(device_memory::rounded_size(513), 1024u);
  EXPECT_EQ(device_memory::rounded_size((1u << 20) - 1), 1u << 20);
  EXPECT_EQ(device_memory::rounded_size(1u << 20), 2u << 20);
  EXPECT_EQ(device_memory::rounded_size((2u << 20) + 1), 4u << 20);
  EXPECT_THROW(device_memory::rounded_size(SIZE_MAX - 10), Error);
}

TEST(DeviceAllocator, ReusesFreedBlocksOfTheSameRoundedSize) {
  FakeDevice device;
  device.capacity = 1u << 30;
  device_memory::CachingAllocator allocator(std::make_unique<FakeBackend>(device));
  void* first = nullptr;
  {
    std::shared_ptr<void> a = allocator.allocate(1000);
    first = a.get();
    EXPECT_EQ(allocator.stats().allocated, 1024u);
    EXPECT_EQ(allocator.stats().reserved, 1024u);
  }
  EXPECT_EQ(allocator.stats().allocated, 0u);
  EXPECT_EQ(allocator.stats().reserved, 1024u);  // cached, not released
  EXPECT_EQ(device.releases, 0);
  std::shared_ptr<void> b = allocator.allocate(900);  // rounds to the same 1024
  EXPECT_EQ(b.get(), first);
  EXPECT_EQ(device.allocations, 1);
  std::shared_ptr<void> c = allocator.allocate(2000);  // another size: a new block
  EXPECT_NE(c.get(), first);
  EXPECT_EQ(device.allocations, 2);
  EXPECT_EQ(allocator.stats().allocated, 1024u + 2048u);
  EXPECT_EQ(allocator.stats().max_allocated, 1024u + 2048u);
}

TEST(DeviceAllocator, TracksThePeakAndEmptiesTheCache) {
  FakeDevice device;
  device.capacity = 1u << 30;
  device_memory::CachingAllocator allocator(std::make_unique<FakeBackend>(device));
  {
    auto a = allocator.allocate(3u << 20), b = allocator.allocate(5u << 20);
    EXPECT_EQ(allocator.stats().allocated, (4u << 20) + (6u << 20));
  }
  EXPECT_EQ(allocator.stats().allocated, 0u);
  EXPECT_EQ(allocator.stats().max_allocated, 10u << 20);
  allocator.reset_peak();
  EXPECT_EQ(allocator.stats().max_allocated, 0u);
  auto live = allocator.allocate(100);
  allocator.empty_cache();  // releases the two cached blocks, keeps the live one
  EXPECT_EQ(device.releases, 2);
  EXPECT_EQ(device.live.size(), 1u);
  EXPECT_EQ(allocator.stats().reserved, 512u);
  EXPECT_EQ(allocator.stats().max_allocated, 512u);
}

TEST(DeviceAllocator, OutOfMemoryEmptiesTheCacheThenNamesTheSize) {
  FakeDevice device;
  device.capacity = 8u << 20;
  device_memory::CachingAllocator allocator(std::make_unique<FakeBackend>(device));
  { auto cached = allocator.allocate(6u << 20); }  // 6 MiB stays cached
  auto fits = allocator.allocate(4u << 20);        // only after the cache is released
  EXPECT_EQ(device.releases, 1);
  EXPECT_EQ(allocator.stats().reserved, 4u << 20);
  const std::string message = message_of([&] { allocator.allocate(100u << 20); });
  EXPECT_NE(message.find("out of memory on fake:0"), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(100u << 20) + " bytes"), std::string::npos) << message;
  EXPECT_EQ(allocator.stats().allocated, 4u << 20);  // the failed request left no trace
}

TEST(DeviceAllocator, ReleasesCachedBlocksWhenDestroyed) {
  FakeDevice device;
  device.capacity = 1u << 30;
  {
    device_memory::CachingAllocator allocator(std::make_unique<FakeBackend>(device));
    allocator.allocate(10);
    allocator.allocate(5000);
  }
  EXPECT_EQ(device.allocations, 2);
  EXPECT_EQ(device.releases, 2);
  EXPECT_TRUE(device.live.empty());
}

TEST(CudaUnavailable, EachCauseHasItsMessage) {
  using cuda_runtime::Failure;
  const auto message = [](Failure failure, int index = 0, int count = 0) {
    cuda_runtime::Probe probe{.failure = failure, .device_count = count, .driver_version = 12040, .runtime_version = 13000,
                              .detail = "cudaErrorUnknown: unknown error"};
    if (failure == Failure::no_driver) probe.driver_version = 0;
    return cuda_runtime::unavailable_message(index, probe);
  };
  EXPECT_EQ(message(Failure::not_built),
            "device cuda:0 is not available: this kael build runs on the CPU only (devices: cpu)");
  EXPECT_NE(message(Failure::no_driver).find("no NVIDIA driver was found"), std::string::npos);
  EXPECT_NE(message(Failure::no_driver).find("CUDA 13.0"), std::string::npos);
  EXPECT_NE(message(Failure::driver_too_old).find("supports CUDA 12.4, this kael build needs CUDA 13.0"), std::string::npos);
  EXPECT_NE(message(Failure::no_device).find("sees no CUDA device"), std::string::npos);
  EXPECT_NE(message(Failure::other).find("cudaErrorUnknown"), std::string::npos);
  EXPECT_EQ(message(Failure::none, 1, 1), "device cuda:1 is not available: this machine has one CUDA device, cuda:0");
  EXPECT_EQ(message(Failure::none, 4, 2), "device cuda:4 is not available: this machine has 2 CUDA devices, cuda:0 to cuda:1");
}

// The tests below run on machines without a usable GPU (CI, the build machines); on a GPU the
// CUDA tests (tests/cuda_test.cpp) cover the same calls.
class NoGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::is_available()) GTEST_SKIP() << "a CUDA device is available here";
  }
};

TEST_F(NoGpu, CudaIsAnErrorNamingTheCause) {
  const cuda_runtime::Probe& probe = cuda_runtime::probe();
  EXPECT_NE(probe.failure, cuda_runtime::Failure::none);
  EXPECT_EQ(probe.failure == cuda_runtime::Failure::not_built, KAEL_WITH_CUDA == 0);
  const std::string expected = cuda_runtime::unavailable_message(0, probe);
  EXPECT_EQ(message_of([] { parse_device("cuda"); }), expected);
  EXPECT_EQ(message_of([] { check_device_available({Device::Type::cuda, 0}); }), expected);
  EXPECT_EQ(message_of([] { Tensor::empty(DType::F32, {2}, {Device::Type::cuda, 0}); }), expected);
  EXPECT_EQ(message_of([] { parse_device("cuda:3"); }), cuda_runtime::unavailable_message(3, probe));
  EXPECT_NO_THROW(check_device_available(Device::cpu()));
}

TEST_F(NoGpu, RuntimeQueriesAnswerWithoutADevice) {
  EXPECT_EQ(cuda::device_count(), 0);
  EXPECT_NO_THROW(cuda::synchronize());
  EXPECT_NO_THROW(cuda_synchronize());
  EXPECT_EQ(cuda::memory_allocated(), 0u);
  EXPECT_EQ(cuda::max_memory_allocated(), 0u);
  EXPECT_EQ(cuda::memory_reserved(), 0u);
  EXPECT_NO_THROW(cuda::empty_cache());
  EXPECT_NO_THROW(cuda::reset_peak_memory_stats());
  cuda::manual_seed(1234);
  EXPECT_EQ(cuda::initial_seed(), 1234u);
}

TEST(DeviceTensor, TheCpuAccessorsRefuseAnotherDevice) {
  // Host bytes labelled as a CUDA device's: whatever the label, no CPU accessor may read them.
  auto storage = std::make_shared<std::vector<float>>(6, 1.0f);
  Tensor t = Tensor::borrow(DType::F32, {2, 3}, reinterpret_cast<std::byte*>(storage->data()), storage,
                            {Device::Type::cuda, 0});
  EXPECT_EQ(t.device().str(), "cuda:0");
  const std::string refusal = message_of([&] { t.data<float>(); });
  EXPECT_NE(refusal.find("expected a cpu tensor, got one on cuda:0"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find(".cpu()"), std::string::npos) << refusal;
  const Tensor& c = t;
  EXPECT_EQ(message_of([&] { c.data<float>(); }), refusal);
  EXPECT_EQ(message_of([&] { t.raw_data(); }), refusal);
  EXPECT_EQ(message_of([&] { c.raw_data(); }), refusal);
  EXPECT_EQ(message_of([&] { t.at<float>({0, 0}); }), refusal);
  EXPECT_EQ(message_of([&] { t.bytes(); }), refusal);
  EXPECT_EQ(message_of([&] { t.value_as_double(0); }), refusal);
  EXPECT_EQ(message_of([&] { t.packed_copy(); }), refusal);
  EXPECT_EQ(message_of([&] { t.to_f32(); }), refusal);
  EXPECT_EQ(message_of([&] { t.transpose().data<float>(); }), refusal);  // views keep the device
  EXPECT_EQ(t.device_data<float>(), storage->data());                    // device code's accessor
  EXPECT_THROW(t.device_data<std::int32_t>(), TypeError);
}

TEST(DeviceTensor, TwoDevicesInOneOpIsAValueErrorNamingBoth) {
  EXPECT_NO_THROW(check_same_device("add", Device::cpu(), Device::cpu()));
  try {
    check_same_device("add", Device::cpu(), {Device::Type::cuda, 1});
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "add: expected all tensors on the same device, got cpu and cuda:1");
  }
}
