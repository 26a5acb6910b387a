// Files exchanged with the Python `safetensors` package. tests/python/test_safetensors_interop.py
// drives both directions through KAEL_INTEROP_DIR: it runs WritesFilesForPython and checks the
// file with safetensors, and writes files with safetensors before running ReadsFilesFromPython.
// Both sides build the same tensors from the same literal values (kept in sync with the Python
// file). Without KAEL_INTEROP_DIR the writer checks itself and the reader is skipped.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "kael/core/error.hpp"
#include "kael/io/safetensors.hpp"

using namespace kael;
namespace fs = std::filesystem;

namespace {

// Six values per dtype, covering the extremes (and, for floats, -0.0 and the smallest subnormal).
template <class T>
Tensor make(std::initializer_list<T> values) {
  Tensor t = Tensor::zeros(dtype_of<T>(), {2, 3});
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}
Tensor make_half(DType dtype, std::initializer_list<float> values) {
  Tensor t = Tensor::zeros(dtype, {2, 3});
  std::uint16_t* out = reinterpret_cast<std::uint16_t*>(t.raw_data());
  for (float v : values) *out++ = dtype == DType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
  return t;
}

std::map<std::string, Tensor> pattern() {
  std::map<std::string, Tensor> t;
  t["BOOL"] = make<bool>({true, false, false, true, true, false});
  t["U8"] = make<std::uint8_t>({0, 1, 127, 128, 254, 255});
  t["I8"] = make<std::int8_t>({-128, -1, 0, 1, 126, 127});
  t["U16"] = make<std::uint16_t>({0, 1, 32767, 32768, 65534, 65535});
  t["I16"] = make<std::int16_t>({-32768, -1, 0, 1, 32766, 32767});
  t["U32"] = make<std::uint32_t>({0, 1, 2147483647u, 2147483648u, 4294967294u, 4294967295u});
  t["I32"] = make<std::int32_t>({INT32_MIN, -1, 0, 1, 2147483646, INT32_MAX});
  t["U64"] = make<std::uint64_t>({0, 1, 9007199254740993ull, 9223372036854775808ull, 18446744073709551614ull, UINT64_MAX});
  t["I64"] = make<std::int64_t>({INT64_MIN, -9007199254740993ll, -1, 0, 9007199254740993ll, INT64_MAX});
  t["F16"] = make_half(DType::F16, {-65504.0f, -1.5f, -0.0f, 5.960464477539063e-08f, 0.333251953125f, 65504.0f});
  t["BF16"] = make_half(DType::BF16, {-3.3895313892515355e38f, -1.5f, 0.0f, 9.183549615799121e-41f, 0.333984375f,
                                      3.3895313892515355e38f});
  t["F32"] = make<float>({-3.4028234663852886e38f, -1.0f, -0.0f, 1.401298464324817e-45f, 0.3333333432674408f,
                          3.4028234663852886e38f});
  t["F64"] = make<double>({-1.7976931348623157e308, -1.0, -0.0, 5e-324, 1.0 / 3.0, 1.7976931348623157e308});
  Tensor scalar = Tensor::zeros(DType::F32, {});
  scalar.data<float>()[0] = 2.5f;
  t["scalar_f32"] = scalar;
  t["empty_i64"] = Tensor::zeros(DType::I64, {2, 0});
  return t;
}

const char* interop_dir() { return std::getenv("KAEL_INTEROP_DIR"); }

void expect_same_bytes(const Tensor& expected, const Tensor& actual, const std::string& name) {
  SCOPED_TRACE(name);
  ASSERT_EQ(dtype_name(expected.dtype()), dtype_name(actual.dtype()));
  ASSERT_EQ(expected.shape(), actual.shape());
  ASSERT_EQ(expected.nbytes(), actual.nbytes());
  EXPECT_EQ(0, std::memcmp(expected.raw_data(), actual.raw_data(), expected.nbytes()));
}

}  // namespace

TEST(Interop, WritesFilesForPython) {
  const char* dir = interop_dir();
  const fs::path out = dir ? fs::path(dir) : fs::temp_directory_path() / str("kael_interop_", ::getpid());
  fs::create_directories(out);
  const std::map<std::string, std::string> metadata{{"writer", "kael"}, {"ünï", "cödé"}};
  io::save_safetensors(out / "kael_all.safetensors", pattern(), metadata);
  const auto loaded = io::read_safetensors(out / "kael_all.safetensors");
  EXPECT_EQ(loaded.metadata, metadata);
  for (const auto& [name, t] : pattern()) expect_same_bytes(t, loaded.tensors.at(name), name);
  if (!dir) fs::remove_all(out);
}

TEST(Interop, ReadsFilesFromPython) {
  const char* dir = interop_dir();
  if (!dir) GTEST_SKIP() << "run by tests/python/test_safetensors_interop.py";
  const auto expected = pattern();
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("python_", 0) != 0) continue;
    ++files;
    SCOPED_TRACE(entry.path().string());
    for (bool mmap : {true, false}) {
      const auto loaded = io::read_safetensors(entry.path(), {.mmap = mmap});
      EXPECT_EQ(loaded.metadata.at("writer"), "python");
      EXPECT_GE(loaded.tensors.size(), 6u);
      for (const auto& [name, t] : loaded.tensors) {
        ASSERT_TRUE(expected.count(name)) << "unexpected tensor " << name;
        expect_same_bytes(expected.at(name), t, name);
      }
    }
  }
  EXPECT_GE(files, 2);
}
