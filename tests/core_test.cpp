// Tests of the core: errors, dtypes and their conversions, tensors and views.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "kael/core/dtype.hpp"
#include "kael/core/error.hpp"
#include "kael/core/file.hpp"
#include "kael/core/json.hpp"
#include "kael/core/tensor.hpp"
#include "kael/core/utf8.hpp"
#include "core/huge_pages.hpp"

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

TEST(Json, NestingPastTheLimitIsAValueErrorBeforeParsing) {
  const std::string deep = std::string(50'000, '[') + std::string(50'000, ']');
  try {
    (void)json::parse(deep, "the body");
    ADD_FAILURE() << "50,000 levels were parsed";
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "the body nests deeper than 64 levels (at byte 64)");
  }
  const std::string at_limit = std::string(64, '[') + std::string(64, ']');
  EXPECT_EQ(json::parse(at_limit, "x").dump(), at_limit);
  EXPECT_THROW((void)json::parse("[[[]]]", "x", 2), ValueError);
  EXPECT_NO_THROW((void)json::parse("[[]]", "x", 2));
  // Brackets inside strings, escaped quotes included, are not nesting.
  const std::string in_string = "[\"\\\"" + std::string(100, '[') + "\"]";
  EXPECT_EQ(json::parse(in_string, "x").at(0).get<std::string>(), "\"" + std::string(100, '['));
  EXPECT_THROW((void)json::parse_ordered(deep, "x"), ValueError);
}

TEST(Json, MalformedTextNamesItsSourceAndNulIsNotJson) {
  const auto message = [](std::string_view text) {
    try {
      (void)json::parse(text, "'f.json'");
    } catch (const ValueError& e) {
      return std::string(e.what());
    }
    return std::string("(parsed)");
  };
  EXPECT_EQ(message("{").rfind("'f.json' is not valid JSON: ", 0), 0u) << message("{");
  EXPECT_NE(message("{}x").find("not valid JSON"), std::string::npos);
  EXPECT_NE(message("{/*c*/}").find("not valid JSON"), std::string::npos);  // comments are not JSON
  EXPECT_EQ(message(std::string_view("{}\0{", 4)), "'f.json' is not valid JSON: a NUL byte at offset 2");
  EXPECT_EQ(json::parse(" {\"a\": [1]} \n", "x")["a"][0], 1);
  // A long bad token is not quoted whole.
  EXPECT_LT(message("[" + std::string(100'000, 'x') + "]").size(), 400u);
}

TEST(Json, TheCallbackSeesEachEventAndMayRefuse) {
  int keys = 0;
  const auto count_keys = [&](int, nlohmann::json::parse_event_t event, nlohmann::json&) {
    if (event == nlohmann::json::parse_event_t::key && ++keys > 1) throw ValueError("one key only");
    return true;
  };
  EXPECT_NO_THROW((void)json::parse(R"({"a": 1})", "x", json::kMaxDepth, count_keys));
  keys = 0;
  EXPECT_THROW((void)json::parse(R"({"a": 1, "b": 2})", "x", json::kMaxDepth, count_keys), ValueError);
}

TEST(RegularFile, ReadsAtMostItsCapAndRefusesWhatIsNotARegularFile) {
  const auto dir = std::filesystem::temp_directory_path() / ("kael_core_file_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "ten") << "0123456789";
  EXPECT_EQ(read_regular_file(dir / "ten", "ten", 10), "0123456789");
  try {
    (void)read_regular_file(dir / "ten", "the file", 9);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "the file '" + (dir / "ten").string() + "' is larger than the limit of 9 bytes");
  }
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);  // no writer: a plain open() would wait forever
  try {
    (void)read_regular_file(dir / "fifo", "key file", 1 << 20);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a regular file (it is a FIFO)"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)read_regular_file("/dev/zero", "key file", 1 << 20), Error);  // never read without end
  std::filesystem::remove_all(dir);
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

TEST(Tensor, LargeTensorsAreZeroedAndOnHugePageBoundaries) {
  // 5 MiB and a few floats: two huge pages and a tail in small pages.
  const std::int64_t n = (std::int64_t{5} << 18) + 7;
  Tensor t = Tensor::zeros(DType::F32, {n});
  const auto* data = t.data<float>();
#if defined(__linux__)
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(data) % kHugePage, 0u);
#endif
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(data[i], 0.0f) << i;
  t.data<float>()[n - 1] = 1.0f;  // the last float is writable
  EXPECT_EQ(t.data<float>()[n - 1], 1.0f);
}

TEST(HugePages, AllocationIsAlignedAndWholeOrNull) {
  std::shared_ptr<void> memory = allocate_huge_aligned(kHugePage + 1);
#if defined(__linux__)
  ASSERT_NE(memory, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(memory.get()) % kHugePage, 0u);
  auto* bytes = static_cast<unsigned char*>(memory.get());
  EXPECT_EQ(bytes[0], 0);
  EXPECT_EQ(bytes[kHugePage], 0);
  bytes[kHugePage] = 1;
#endif
  EXPECT_EQ(allocate_huge_aligned(0), nullptr);
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

TEST(Tensor, TransposeViewAndPackedCopy) {
  Tensor t = Tensor::zeros(DType::I32, {2, 3});
  for (int i = 0; i < 6; ++i) t.data<std::int32_t>()[i] = i;
  Tensor v = t.transpose();
  EXPECT_EQ(v.shape(), (Shape{3, 2}));
  EXPECT_FALSE(v.is_contiguous());
  EXPECT_EQ(v.raw_data(), t.raw_data());  // a view, not a copy
  EXPECT_EQ(v.at<std::int32_t>({2, 1}), 5);
  EXPECT_EQ(v.at<std::int32_t>({1, 0}), 1);
  EXPECT_THROW((void)v.bytes(), ValueError);
  Tensor c = v.packed_copy();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_NE(c.raw_data(), t.raw_data());
  const std::int32_t expected[] = {0, 3, 1, 4, 2, 5};
  EXPECT_EQ(std::memcmp(c.raw_data(), expected, sizeof expected), 0);
  EXPECT_THROW(Tensor::zeros(DType::F32, {2, 2, 2}).transpose(), ValueError);
  // A strided 3-D view (every other row of a 4 x 3 x 2 tensor, the last dims swapped) and an
  // empty one.
  Tensor big = Tensor::zeros(DType::I64, {4, 3, 2});
  for (int i = 0; i < 24; ++i) big.data<std::int64_t>()[i] = i;
  const Tensor strided = big.as_strided({2, 2, 3}, {12, 1, 2});
  const Tensor packed = strided.packed_copy();
  for (std::int64_t a = 0; a < 2; ++a)
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t c3 = 0; c3 < 3; ++c3)
        EXPECT_EQ(packed.at<std::int64_t>({a, b, c3}), a * 12 + b + c3 * 2);
  EXPECT_EQ(big.as_strided({0, 3}, {1, 2}).packed_copy().numel(), 0);
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

namespace {
utf8::Decoded decode(std::string_view bytes) {
  return utf8::decode(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}
}  // namespace

TEST(Utf8, DecodeAcceptsOnlyWellFormedCharacters) {
  EXPECT_EQ(decode("A").cp, 0x41u);
  EXPECT_EQ(decode("\u00e9").cp, 0xE9u);
  EXPECT_EQ(decode("\u20ac").cp, 0x20ACu);
  EXPECT_EQ(decode("\U0001F600").cp, 0x1F600u);
  EXPECT_EQ(decode("\U0001F600").length, 4u);
  EXPECT_EQ(decode("\U0010FFFF").cp, 0x10FFFFu);
  EXPECT_EQ(decode("\xed\x9f\xbf").cp, 0xD7FFu);  // just below the surrogates
  EXPECT_EQ(decode("\xee\x80\x80").cp, 0xE000u);  // just above them
  for (std::string_view bad : {"\x80", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xed\xa0\x80", "\xf0\x80\x80\x80",
                               "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xff", "\xe2\x82", "\xc3", "\xc3\x41",
                               "\xe2\x82\x41", "\xf0\x9f\x98\x41"}) {
    const utf8::Decoded d = decode(bad);
    EXPECT_EQ(d.cp, utf8::kInvalid) << bad;
    EXPECT_EQ(d.length, 1u) << bad;
  }
}

// The definition, written the other way round: the length from the lead byte's high bits, the
// payload bits gathered, then the shortest-form, surrogate and U+10FFFF rules checked on the value.
utf8::Decoded decode_by_definition(const unsigned char* s, std::size_t n) {
  if (s[0] < 0x80) return {s[0], 1};
  std::size_t extra = 0;
  std::uint32_t cp = 0;
  if ((s[0] & 0xE0) == 0xC0) extra = 1, cp = s[0] & 0x1F;
  else if ((s[0] & 0xF0) == 0xE0) extra = 2, cp = s[0] & 0x0F;
  else if ((s[0] & 0xF8) == 0xF0) extra = 3, cp = s[0] & 0x07;
  else return {utf8::kInvalid, 1};
  if (n <= extra) return {utf8::kInvalid, 1};
  for (std::size_t k = 1; k <= extra; ++k) {
    if ((s[k] & 0xC0) != 0x80) return {utf8::kInvalid, 1};
    cp = (cp << 6) | (s[k] & 0x3F);
  }
  static constexpr std::uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
  if (cp < kMin[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {utf8::kInvalid, 1};
  return {cp, static_cast<std::uint32_t>(extra + 1)};
}

// Every sequence of 1 to 3 bytes, and 4-byte ones for every first two bytes.
TEST(Utf8, DecodeEqualsTheDefinitionOnEverySequence) {
  const auto check = [](const unsigned char* s, std::size_t n) {
    const utf8::Decoded d = utf8::decode(s, n), want = decode_by_definition(s, n);
    ASSERT_EQ(d.cp, want.cp) << int{s[0]} << " " << n;
    ASSERT_EQ(d.length, want.length) << int{s[0]} << " " << n;
  };
  unsigned char s[4];
  for (std::uint32_t v = 0; v < (1u << 24); ++v) {
    s[0] = static_cast<unsigned char>(v >> 16), s[1] = static_cast<unsigned char>(v >> 8);
    s[2] = static_cast<unsigned char>(v);
    check(s, 3);
    if (s[2] == 0) check(s, 2);
    if (s[1] == 0 && s[2] == 0) check(s, 1);
    if (s[0] >= 0xF0) {
      for (const unsigned char last : {0x00, 0x41, 0x80, 0xBF, 0xC0, 0xFF}) {
        s[3] = last;
        check(s, 4);
      }
    }
  }
}

TEST(Utf8, FindInvalidGivesTheFirstBadOffset) {
  EXPECT_FALSE(utf8::find_invalid("plain ascii"));
  EXPECT_FALSE(utf8::find_invalid("\xc2\x80 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf"));  // U+0080 € 😀 U+10FFFF
  EXPECT_EQ(utf8::find_invalid("ok\x80"), 2u);             // lone continuation byte
  EXPECT_EQ(utf8::find_invalid("\xc1\xbf"), 0u);           // overlong 2-byte
  EXPECT_EQ(utf8::find_invalid("a\xe0\x80\xaf"), 1u);      // overlong 3-byte
  EXPECT_EQ(utf8::find_invalid("\xf0\x80\x80\xaf"), 0u);  // overlong 4-byte
  EXPECT_EQ(utf8::find_invalid("\xed\xa0\x80"), 0u);      // surrogate U+D800
  EXPECT_EQ(utf8::find_invalid("\xf4\x90\x80\x80"), 0u);  // U+110000
  EXPECT_EQ(utf8::find_invalid("\xf5\x80\x80\x80"), 0u);  // lead byte past F4
  EXPECT_EQ(utf8::find_invalid("ab\xe2\x82"), 2u);         // truncated at the end
  EXPECT_EQ(utf8::find_invalid("\xe2\x28\xa1"), 0u);      // bad continuation
  EXPECT_TRUE(utf8::is_valid(""));
}

TEST(Utf8, IncompleteTailHoldsOnlyStartsOfRealCharacters) {
  EXPECT_EQ(utf8::incomplete_tail(""), 0u);
  EXPECT_EQ(utf8::incomplete_tail("abc"), 0u);
  EXPECT_EQ(utf8::incomplete_tail("a\xe6"), 1u);
  EXPECT_EQ(utf8::incomplete_tail("a\xe6\x97"), 2u);
  EXPECT_EQ(utf8::incomplete_tail("a\xe6\x97\xa5"), 0u);
  EXPECT_EQ(utf8::incomplete_tail("\xf0\x9f\x98"), 3u);
  EXPECT_EQ(utf8::incomplete_tail("\xf0\x9f\x98\x80"), 0u);
  EXPECT_EQ(utf8::incomplete_tail("\xc3"), 1u);
  EXPECT_EQ(utf8::incomplete_tail("\x80"), 0u);      // a stray continuation byte never completes
  EXPECT_EQ(utf8::incomplete_tail("\xff"), 0u);      // nor does an impossible byte
  EXPECT_EQ(utf8::incomplete_tail("\xe0\x80"), 0u);  // overlong start
  EXPECT_EQ(utf8::incomplete_tail("\xed\xa0"), 0u);  // surrogate start
  EXPECT_EQ(utf8::incomplete_tail("\xf4\x90"), 0u);  // above U+10FFFF
  EXPECT_EQ(utf8::incomplete_tail("\x80\x80\x80"), 0u);
}
