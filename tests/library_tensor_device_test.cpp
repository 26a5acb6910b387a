// The tensor library's ops given tensors on a CUDA device, on every machine: the checks that
// come before any device work (one device per op, the dtypes and layouts the device kernels
// cover, the refusal of ops without one), and, without a usable GPU, the error naming the cause.
// The same ops run on a GPU in tests/cuda_test.cpp (scripts/test_cuda.sh).
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kael/core/cuda.hpp"
#include "kael/tensor/ops.hpp"
#include "kernels/binary_arith.hpp"

using namespace kael;

namespace {

// Host bytes labelled as cuda:0's: enough to reach every check made before device memory is touched.
// T's dtype, or `dtype` of T's size.
template <class T>
Tensor labelled_cuda(Shape shape, DType dtype = dtype_of<T>()) {
  auto storage = std::make_shared<std::vector<T>>(static_cast<std::size_t>(shape_numel(shape)), T{1});
  return Tensor::borrow(dtype, std::move(shape), reinterpret_cast<std::byte*>(storage->data()), storage,
                        {Device::Type::cuda, 0});
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

TEST(TensorOnDevice, TwoDevicesInOneOpIsAValueErrorNamingBoth) {
  const Tensor x = labelled_cuda<float>({2, 3});
  EXPECT_EQ(message_of<ValueError>([&] { add(ones({2, 3}), x); }),
            "add: expected all tensors on the same device, got cpu and cuda:0");
  EXPECT_EQ(message_of<ValueError>([&] { mul(x, ones({3})); }),
            "mul: expected all tensors on the same device, got cuda:0 and cpu");
  EXPECT_EQ(message_of<ValueError>([&] { maximum(x, ones({2, 3})); }),
            "maximum: expected all tensors on the same device, got cuda:0 and cpu");
}

TEST(TensorOnDevice, WhatTheDeviceKernelsDoNotCoverYetIsAnError) {
  const Tensor x = labelled_cuda<float>({2, 3});
  EXPECT_NE(message_of<Error>([&] { add(labelled_cuda<std::int64_t>({2, 3}), labelled_cuda<std::int64_t>({2, 3})); })
                .find("add on cuda:0 is implemented for float32 tensors only so far, got I64 and I64"),
            std::string::npos);
  EXPECT_NE(message_of<Error>([&] { lt(labelled_cuda<std::int64_t>({2}), labelled_cuda<std::int64_t>({2})); })
                .find("lt on cuda:0 is implemented for float32 tensors only so far, got I64 and I64"),
            std::string::npos);
  EXPECT_NE(message_of<Error>([&] { labelled_cuda<std::uint16_t>({2}, DType::F16).exp(); })
                .find("exp on cuda:0 is implemented for float32 tensors only so far, got F16"),
            std::string::npos);
  EXPECT_NE(message_of<Error>([&] { labelled_cuda<std::int64_t>({2, 3}).sum(); })
                .find("sum on cuda:0 is implemented for float32 tensors only so far, got I64"),
            std::string::npos);
  EXPECT_EQ(message_of<ValueError>([&] { where(labelled_cuda<std::uint8_t>({2, 3}, DType::BOOL), x, ones({2, 3})); }),
            "where: expected all tensors on the same device, got cuda:0 and cpu");
  // Ops without a device path reach the CPU's accessors, which refuse device memory.
  EXPECT_NE(message_of<Error>([&] { cat({x, x}, 0); }).find("expected a cpu tensor, got one on cuda:0"), std::string::npos);
  EXPECT_NE(message_of<Error>([&] { dropout(x, 0.5); }).find("expected a cpu tensor, got one on cuda:0"), std::string::npos);
}

TEST(TensorOnDevice, WithoutAUsableGpuTheCauseIsNamed) {
  if (cuda::is_available()) GTEST_SKIP() << "a CUDA device is available here";
  std::string cause;
  try {
    check_device_available({Device::Type::cuda, 0});
  } catch (const Error& e) {
    cause = e.what();
  }
  ASSERT_NE(cause.find("device cuda:0 is not available"), std::string::npos) << cause;
  const Tensor x = labelled_cuda<float>({2, 3});
  EXPECT_EQ(message_of<Error>([&] { add(x, x); }), cause);
  EXPECT_EQ(message_of<Error>([&] { mul(x, 2.0); }), cause);  // a CPU scalar joins the device tensor
  EXPECT_EQ(message_of<Error>([&] { labelled_cuda<float>({}).item<float>(); }), cause);
  EXPECT_EQ(message_of<Error>([&] { x.to_vector<float>(); }), cause);
  EXPECT_EQ(message_of<Error>([&] { x.cpu(); }), cause);
  EXPECT_EQ(message_of<Error>([&] { std::ostringstream out; out << x; }), cause);
  EXPECT_EQ(message_of<Error>([&] { ones({2}).to("cuda"); }), cause);
}

// The CUDA kernels compute each element with kernels::arith::binary (kernels/binary_arith.hpp);
// on the CPU it gives what the CPU's ops give, bit for bit, which tests/cuda_test.cpp then
// asks of the device.
TEST(TensorOnDevice, TheDeviceArithmeticIsTheCpuOps) {
  using kernels::arith::Binary;
  const Tensor a = from_vector<float>({1.5f, -2.25f, 3.0f, 1e-3f, 0.1f}, {5});
  const Tensor b = from_vector<float>({0.1f, 7.0f, -3.0f, 3.0f, 0.0f}, {5});
  const auto va = a.to_vector<float>(), vb = b.to_vector<float>();
  const auto sum = add(a, b).to_vector<float>(), scaled = add(a, b, 0.3).to_vector<float>();
  const auto difference = sub(a, b).to_vector<float>(), product = mul(a, b).to_vector<float>();
  const auto ratio = div(a, b).to_vector<float>();
  for (std::size_t i = 0; i < va.size(); ++i) {
    EXPECT_EQ(sum[i], kernels::arith::binary(Binary::add, va[i], vb[i], 1.0f));
    EXPECT_EQ(scaled[i], kernels::arith::binary(Binary::add, va[i], vb[i], 0.3f));
    EXPECT_EQ(difference[i], kernels::arith::binary(Binary::add, va[i], vb[i], -1.0f));
    EXPECT_EQ(product[i], kernels::arith::binary(Binary::mul, va[i], vb[i], 1.0f));
    EXPECT_EQ(ratio[i], kernels::arith::binary(Binary::div, va[i], vb[i], 1.0f));
  }
}
