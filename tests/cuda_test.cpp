// Tensors on a CUDA device, on a machine with one: storage, copies, the caching allocator's
// figures, out of memory, and the elementwise ops against the CPU's. Every test is skipped
// where no CUDA device is usable (the no-GPU behaviour is tests/core_device_test.cpp's and
// tests/library_tensor_device_test.cpp's); scripts/test_cuda.sh runs it on a GPU.
#include <gtest/gtest.h>

#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kael/core/cuda.hpp"
#include "kael/nn/layers.hpp"
#include "kael/tensor/ops.hpp"

using namespace kael;

namespace {

class Cuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no usable CUDA device here";
  }
};

const Device kCuda{Device::Type::cuda, 0};

std::vector<float> random_values(std::int64_t n, unsigned seed, float low = -3.0f, float high = 3.0f) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> out(static_cast<std::size_t>(n));
  for (float& v : out) v = dist(engine);
  return out;
}

template <class E>
std::string message_of(auto&& call) {
  try {
    call();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error of that type)";
}

}  // namespace

TEST_F(Cuda, DeviceQueries) {
  EXPECT_GE(cuda::device_count(), 1);
  EXPECT_EQ(parse_device("cuda"), kCuda);
  const std::string past = message_of<Error>([] { parse_device(str("cuda:", cuda::device_count())); });
  EXPECT_NE(past.find("this machine has"), std::string::npos) << past;
  EXPECT_NO_THROW(cuda::synchronize());
  EXPECT_NO_THROW(cuda_synchronize());
}

TEST_F(Cuda, CopiesThereAndBack) {
  const std::vector<float> values = random_values(6 * 7, 1);
  const Tensor host = from_vector<float>(values, {6, 7});
  const Tensor device = host.to("cuda");
  EXPECT_EQ(device.device(), kCuda);
  EXPECT_EQ(device.shape(), host.shape());
  EXPECT_EQ(device.to_vector<float>(), values);
  EXPECT_EQ(device.cpu().device(), Device::cpu());
  EXPECT_EQ(device.cpu().to_vector<float>(), values);
  EXPECT_EQ(device.to(kCuda).device_raw_data(), device.device_raw_data());  // already there: the same tensor
  EXPECT_EQ(device.select(0, 2).select(0, 3).item<float>(), values[2 * 7 + 3]);
  // Strided views both ways: a transposed or stepped view copies its own elements only.
  EXPECT_EQ(host.transpose(0, 1).to("cuda").to_vector<float>(), host.transpose(0, 1).contiguous().to_vector<float>());
  EXPECT_EQ(device.transpose(0, 1).cpu().to_vector<float>(), host.transpose(0, 1).contiguous().to_vector<float>());
  EXPECT_EQ(device.slice(1, 1, 7, 3).cpu().to_vector<float>(), host.slice(1, 1, 7, 3).contiguous().to_vector<float>());
  EXPECT_EQ(device.select(1, 4).to(kCuda).device(), kCuda);
  const Tensor ids = from_vector<std::int64_t>({3, 1, 4}, {3}).to("cuda");
  EXPECT_EQ(ids.to_vector<std::int64_t>(), (std::vector<std::int64_t>{3, 1, 4}));
  EXPECT_EQ(Tensor::empty(DType::F32, {0}, kCuda).cpu().numel(), 0);
}

TEST_F(Cuda, PrintsFromAHostCopy) {
  std::ostringstream out;
  out << from_vector<float>({1.0f, 2.5f}, {2}).to("cuda");
  EXPECT_EQ(out.str(), "tensor([1.0000, 2.5000], shape=[2], dtype=F32, device='cuda:0')");
}

TEST_F(Cuda, CpuOpsRefuseDeviceTensors) {
  const Tensor x = ones({4}).to("cuda");
  EXPECT_THROW(x.data<float>(), Error);
  EXPECT_NE(message_of<Error>([&] { x.exp(); }).find("expected a cpu tensor, got one on cuda:0"), std::string::npos);
  EXPECT_NE(message_of<ValueError>([&] { add(ones({4}), x); }).find("got cpu and cuda:0"), std::string::npos);
  EXPECT_NE(message_of<Error>([&] { nn::Linear(2, 2).to("cuda"); }).find("run on the CPU only so far"), std::string::npos);
}

TEST_F(Cuda, TheAllocatorCachesAndCounts) {
  cuda::synchronize();
  cuda::empty_cache();
  const std::size_t before = cuda::memory_allocated();
  cuda::reset_peak_memory_stats();
  {
    const Tensor a = Tensor::empty(DType::F32, {1000}, kCuda);  // 4000 bytes, rounded to 4096
    EXPECT_EQ(cuda::memory_allocated(), before + 4096);
    const Tensor b = Tensor::empty(DType::F32, {1 << 20}, kCuda);  // 4 MiB
    EXPECT_EQ(cuda::memory_allocated(), before + 4096 + (4u << 20));
  }
  EXPECT_EQ(cuda::memory_allocated(), before);
  EXPECT_EQ(cuda::max_memory_allocated(), before + 4096 + (4u << 20));
  EXPECT_GE(cuda::memory_reserved(), before + 4096 + (4u << 20));  // cached
  const Tensor again = Tensor::empty(DType::F32, {1000}, kCuda);  // served from the cache
  cuda::empty_cache();
  EXPECT_EQ(cuda::memory_reserved(), cuda::memory_allocated());
}

TEST_F(Cuda, OutOfMemoryIsAnErrorNamingTheSize) {
  const std::string message = message_of<Error>([] { Tensor::empty(DType::F32, {std::int64_t{1} << 42}, kCuda); });
  EXPECT_NE(message.find("out of memory on cuda:0"), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(std::uint64_t{1} << 44) + " bytes"), std::string::npos) << message;
  EXPECT_NO_THROW(ones({8}).to("cuda").cpu());  // the device still works after
}

// Each element as the CPU computes it (the shared arithmetic of kernels/binary_arith.hpp, no
// fused multiply-add on either side): equal bit for bit.
TEST_F(Cuda, ElementwiseOpsEqualTheCpus) {
  for (const std::int64_t n : {std::int64_t{1}, std::int64_t{1000}, std::int64_t{(1 << 24) + 77}}) {
    const Tensor a = from_vector<float>(random_values(n, 2), {n});
    const Tensor b = from_vector<float>(random_values(n, 3, 0.5f, 4.0f), {n});
    const Tensor da = a.to("cuda"), db = b.to("cuda");
    EXPECT_EQ(add(da, db).to_vector<float>(), add(a, b).to_vector<float>()) << n;
    EXPECT_EQ(add(da, db, 0.3).to_vector<float>(), add(a, b, 0.3).to_vector<float>()) << n;
    EXPECT_EQ(sub(da, db).to_vector<float>(), sub(a, b).to_vector<float>()) << n;
    EXPECT_EQ(mul(da, db).to_vector<float>(), mul(a, b).to_vector<float>()) << n;
    EXPECT_EQ(div(da, db).to_vector<float>(), div(a, b).to_vector<float>()) << n;
    EXPECT_EQ(mul(da, 2.5).to_vector<float>(), mul(a, 2.5).to_vector<float>()) << n;    // a CPU scalar
    EXPECT_EQ(div(da, db.select(0, 0)).to_vector<float>(), div(a, b.select(0, 0)).to_vector<float>()) << n;
    EXPECT_EQ(add(da, db).device(), kCuda);
  }
  const Tensor m = from_vector<float>(random_values(12, 4), {3, 4});
  EXPECT_EQ(mul(m.to("cuda"), m.to("cuda")).shape(), (Shape{3, 4}));
  EXPECT_EQ(mul(Tensor::empty(DType::F32, {0}, kCuda), Tensor::empty(DType::F32, {0}, kCuda)).numel(), 0);
  cuda::synchronize();
}
