// Tests of the core: errors, dtypes and their conversions, tensors and views.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "kael/core/dtype.hpp"
#include "kael/core/error.hpp"
#include "kael/core/tensor.hpp"

using namespace kael;

TEST(Errors, HierarchyDerivesFromError) {
  EXPECT_THROW(throw ValueError("v"), Error);
  EXPECT_THROW(throw TypeError("t"), Error);
  EXPECT_THROW(throw IndexError("i"), Error);
  EXPECT_EQ(str("a", 1, "b", 2.5), "a1b2.5");
}

TEST(Errors, CheckedArithmetic) {
  std::uint64_t out = 0;
  EXPECT_TRUE(checked_mul(1ull << 31, 1ull << 31, out));
  EXPECT_EQ(out, 1ull << 62);
  EXPECT_FALSE(checked_mul(1ull << 32, 1ull << 32, out));
  EXPECT_FALSE(checked_add(UINT64_MAX, 1, out));
}

TEST(DType, NamesSizesAndParsing) {
  for (DType d : kAllDTypes) {
    auto parsed = dtype_from_name(dtype_name(d));
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(*parsed, d);
  }
  EXPECT_EQ(dtype_size(DType::BOOL), 1u);
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::F64), 8u);
  EXPECT_FALSE(dtype_from_name("F8_E4M3").has_value());
  EXPECT_FALSE(dtype_from_name("f32").has_value());
}

// Every one of the 65536 half values decodes exactly and encodes back to itself (NaNs stay NaN).
TEST(DType, F16RoundTripsEveryValue) {
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    float f = f16_to_f32(static_cast<std::uint16_t>(bits));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), bits) << "bits " << bits;
  }
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);
  EXPECT_EQ(f32_to_f16(1e6f), 0x7C00);       // overflow to infinity
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie rounds to even
}

TEST(DType, BF16RoundTripsEveryValue) {
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    float f = bf16_to_f32(static_cast<std::uint16_t>(bits));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), bits);
  }
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
}

TEST(Tensor, ZerosShapeStridesAndAccess) {
  Tensor t = Tensor::zeros(DType::F32, {2, 3});
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.nbytes(), 24u);
  EXPECT_EQ(t.strides(), (std::vector<std::int64_t>{3, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_FALSE(t.is_borrowed());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.raw_data()) % 64, 0u);
  t.at<float>({1, 2}) = 5.0f;
  EXPECT_EQ(t.data<float>()[5], 5.0f);
  EXPECT_THROW(t.at<float>({2, 0}), IndexError);
  EXPECT_THROW(t.at<float>({0}), IndexError);
  EXPECT_THROW(t.at<double>({0, 0}), TypeError);
  EXPECT_THROW(Tensor::zeros(DType::F32, {-1, 2}), ValueError);
  EXPECT_THROW(Tensor::zeros(DType::F32, {1ll << 40, 1ll << 40}), ValueError);
}

TEST(Tensor, ScalarAndEmpty) {
  Tensor scalar = Tensor::zeros(DType::I64, {});
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.dim(), 0);
  scalar.at<std::int64_t>({}) = -7;
  EXPECT_EQ(scalar.value_as_double(0), -7.0);
  Tensor empty = Tensor::zeros(DType::F16, {3, 0});
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_EQ(empty.bytes().size(), 0u);
}

TEST(Tensor, TransposeViewAndContiguous) {
  Tensor t = Tensor::zeros(DType::I32, {2, 3});
  for (int i = 0; i < 6; ++i) t.data<std::int32_t>()[i] = i;
  Tensor v = t.transpose();
  EXPECT_EQ(v.shape(), (Shape{3, 2}));
  EXPECT_FALSE(v.is_contiguous());
  EXPECT_EQ(v.raw_data(), t.raw_data());  // a view, not a copy
  EXPECT_EQ(v.at<std::int32_t>({2, 1}), 5);
  EXPECT_EQ(v.at<std::int32_t>({1, 0}), 1);
  EXPECT_THROW((void)v.bytes(), ValueError);
  Tensor c = v.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  const std::int32_t expected[] = {0, 3, 1, 4, 2, 5};
  EXPECT_EQ(std::memcmp(c.raw_data(), expected, sizeof expected), 0);
  EXPECT_THROW(Tensor::zeros(DType::F32, {2, 2, 2}).transpose(), ValueError);
}

TEST(Tensor, BorrowKeepsOwnerAlive) {
  auto buffer = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4});
  std::weak_ptr<std::vector<float>> watch = buffer;
  Tensor t = Tensor::borrow(DType::F32, {4}, reinterpret_cast<std::byte*>(buffer->data()), buffer);
  buffer.reset();
  EXPECT_FALSE(watch.expired());
  EXPECT_TRUE(t.is_borrowed());
  EXPECT_EQ(t.data<float>()[3], 4.0f);
  t = Tensor();
  EXPECT_TRUE(watch.expired());
}

TEST(Tensor, ToF32ConvertsEveryDType) {
  const std::uint16_t half[] = {0x3C00, 0xC000};  // 1, -2
  Tensor h = Tensor::from_bytes(DType::F16, {2}, std::as_bytes(std::span(half)));
  Tensor f = h.to_f32();
  EXPECT_EQ(f.data<float>()[0], 1.0f);
  EXPECT_EQ(f.data<float>()[1], -2.0f);
  const std::uint16_t b[] = {0x3F80, 0x4040};  // 1, 3
  EXPECT_EQ(Tensor::from_bytes(DType::BF16, {2}, std::as_bytes(std::span(b))).to_f32().data<float>()[1], 3.0f);
  const std::int8_t i8[] = {-128, 127};
  EXPECT_EQ(Tensor::from_bytes(DType::I8, {2}, std::as_bytes(std::span(i8))).to_f32().data<float>()[0], -128.0f);
  const std::uint8_t bools[] = {0, 1};
  EXPECT_EQ(Tensor::from_bytes(DType::BOOL, {2}, std::as_bytes(std::span(bools))).to_f32().data<float>()[1], 1.0f);
  EXPECT_THROW(Tensor::from_bytes(DType::F32, {3}, std::as_bytes(std::span(b))), ValueError);
}
