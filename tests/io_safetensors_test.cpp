// Reading, writing and mapping safetensors files: round trips of every dtype, the header format
// the writer produces, the mapped loader's sharing and lifetime rules, and atomic saving.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

#include "kael/core/error.hpp"
#include "kael/io/safetensors.hpp"

using namespace kael;
namespace fs = std::filesystem;

namespace {

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() / str("kael_io_test_", ::getpid(), "_", counter++);
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  const fs::path& path() const { return path_; }
  // Names of everything in the directory (to spot leftover temporary files).
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  fs::path path_;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
std::string le64(std::uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out;
}

// A tensor of `dtype` whose bytes follow a pattern that is a valid value for every dtype
// (BOOL bytes are 0 or 1), different for each seed.
Tensor patterned(DType dtype, Shape shape, unsigned seed = 1) {
  Tensor t = Tensor::zeros(dtype, std::move(shape));
  std::mt19937 rng(seed);
  auto* bytes = reinterpret_cast<unsigned char*>(t.raw_data());
  for (std::size_t i = 0; i < t.nbytes(); ++i)
    bytes[i] = static_cast<unsigned char>(dtype == DType::BOOL ? rng() % 2 : rng() % 256);
  return t;
}

void expect_same(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.shape(), b.shape());
  const Tensor ca = a.packed_copy(), cb = b.packed_copy();
  ASSERT_EQ(ca.nbytes(), cb.nbytes());
  EXPECT_EQ(0, std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()));
}

void expect_same(const io::SafetensorsFile& a, const io::SafetensorsFile& b) {
  EXPECT_EQ(a.metadata, b.metadata);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, tensor] : a.tensors) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(b.tensors.count(name));
    expect_same(tensor, b.tensors.at(name));
  }
}

}  // namespace

// Parameterized over kael's 13 dtypes (the book's reader has 4).
class SafetensorsIo : public ::testing::TestWithParam<DType> {};

TEST_P(SafetensorsIo, RoundTripEveryDtype) {
  const TempDir dir;
  const std::map<std::string, Tensor> tensors{{"x", patterned(GetParam(), {3, 5})}, {"y", patterned(GetParam(), {7}, 2)}};
  io::save_safetensors(dir / "t.safetensors", tensors);
  for (bool mmap : {true, false}) {
    const auto loaded = io::read_safetensors(dir / "t.safetensors", {.mmap = mmap});
    EXPECT_TRUE(loaded.metadata.empty());
    ASSERT_EQ(loaded.tensors.size(), 2u);
    for (const auto& [name, t] : tensors) expect_same(t, loaded.tensors.at(name));
  }
  const std::string bytes = read_file(dir / "t.safetensors");
  expect_same(io::read_safetensors(dir / "t.safetensors"), io::parse_safetensors(std::as_bytes(std::span(bytes))));
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, SafetensorsIo, ::testing::ValuesIn(kAllDTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Metadata, a scalar and empty tensors ([0], [0, 3], [3, 0]).
TEST(SafetensorsIo, MetadataRoundTrip) {
  const TempDir dir;
  const std::map<std::string, std::string> metadata{{"format", "pt"}, {"ünïcödé", "値 ✓"}, {"empty", ""}};
  const std::map<std::string, Tensor> tensors{{"scalar", patterned(DType::F64, {})},
                                              {"empty", Tensor::zeros(DType::F32, {0})},
                                              {"empty2d", Tensor::zeros(DType::I16, {3, 0})},
                                              {"empty0x3", Tensor::zeros(DType::F32, {0, 3})},
                                              {"名前", patterned(DType::U8, {1})}};
  io::save_safetensors(dir / "m.safetensors", tensors, metadata);
  for (bool mmap : {true, false}) {
    const auto loaded = io::read_safetensors(dir / "m.safetensors", {.mmap = mmap});
    EXPECT_EQ(loaded.metadata, metadata);
    for (const auto& [name, t] : tensors) expect_same(t, loaded.tensors.at(name));
    EXPECT_EQ(loaded.tensors.at("scalar").dim(), 0);
    EXPECT_EQ(loaded.tensors.at("scalar").numel(), 1);
    EXPECT_EQ(loaded.tensors.at("empty2d").shape(), (Shape{3, 0}));
    EXPECT_EQ(loaded.tensors.at("empty0x3").shape(), (Shape{0, 3}));
  }
}

TEST(SafetensorsIo, NoTensorsAtAll) {
  const TempDir dir;
  io::save_safetensors(dir / "e.safetensors", {});
  EXPECT_TRUE(io::read_safetensors(dir / "e.safetensors").tensors.empty());
  io::save_safetensors(dir / "e.safetensors", {}, {{"k", "v"}});
  EXPECT_EQ(io::read_safetensors(dir / "e.safetensors").metadata.at("k"), "v");
}

TEST(SafetensorsIo, SavesViewsByValue) {
  const TempDir dir;
  Tensor base = Tensor::zeros(DType::F32, {2, 3});
  for (int i = 0; i < 6; ++i) base.data<float>()[i] = static_cast<float>(i);
  const Tensor view = base.transpose();  // [3, 2], strided
  ASSERT_FALSE(view.is_contiguous());
  io::save_safetensors(dir / "v.safetensors", {{"t", view}});
  const auto loaded = io::read_safetensors(dir / "v.safetensors").tensors.at("t");
  ASSERT_EQ(loaded.shape(), (Shape{3, 2}));
  for (std::int64_t r = 0; r < 3; ++r)
    for (std::int64_t c = 0; c < 2; ++c) EXPECT_EQ(loaded.at<float>({r, c}), static_cast<float>(c * 3 + r));
}

// The entries as the format writes them, keys sorted, the header space-padded so the data starts at
// a multiple of 8, and every tensor aligned for its dtype.
TEST(SafetensorsIo, HeaderFormatMatchesTheSpecification) {
  const TempDir dir;
  // Mixed element sizes, named so that name order would misalign the wider ones.
  const std::map<std::string, Tensor> tensors{{"a_u8", patterned(DType::U8, {3})},
                                              {"b_f64", patterned(DType::F64, {2})},
                                              {"c_i16", patterned(DType::I16, {5})},
                                              {"d_f32", patterned(DType::F32, {2, 2})},
                                              {"E_bool", patterned(DType::BOOL, {1})}};
  io::save_safetensors(dir / "h.safetensors", tensors, {{"z", "1"}});
  const std::string bytes = read_file(dir / "h.safetensors");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  EXPECT_EQ((8 + n) % 8, 0u) << "data must start at a multiple of 8";
  const std::string header = bytes.substr(8, n);
  // Data order is widest dtype first (b_f64 takes bytes 0-16), so the [2, 2] F32 tensor is at 16-32.
  EXPECT_NE(header.find(R"("d_f32":{"data_offsets":[16,32],"dtype":"F32","shape":[2,2]})"), std::string::npos)
      << header;
  const auto end = header.find_last_not_of(' ');
  EXPECT_LT(n - (end + 1), 8u) << "padding is spaces, fewer than 8";
  // Keys in the JSON text appear in sorted (bytewise) order.
  const auto doc = nlohmann::ordered_json::parse(header);
  std::vector<std::string> keys;
  for (const auto& item : doc.items()) keys.push_back(item.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"E_bool", "__metadata__", "a_u8", "b_f64", "c_i16", "d_f32"}));
  // Every tensor starts aligned for its dtype, so a mapped load shares all of them.
  for (const auto& [name, t] : tensors) {
    const std::uint64_t begin = doc[name]["data_offsets"][0];
    EXPECT_EQ((8 + n + begin) % t.element_size(), 0u) << name;
  }
  const auto loaded = io::read_safetensors(dir / "h.safetensors", {.mmap = true});
  for (const auto& [name, t] : loaded.tensors) EXPECT_TRUE(t.is_borrowed()) << name;
}

TEST(SafetensorsIo, ReadsAFileWithPadding) {
  const TempDir dir;
  // Header of odd length (data misaligned by 3, like the GPT-2 file), padded with spaces.
  const std::string json = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string header = json + std::string(7, ' ');
  while ((8 + header.size()) % 8 != 3) header += ' ';
  float values[2] = {1.5f, -2.25f};
  const std::string data(reinterpret_cast<const char*>(values), sizeof values);
  write_file(dir / "p.safetensors", le64(header.size()) + header + data);
  for (bool mmap : {true, false}) {
    const auto t = io::read_safetensors(dir / "p.safetensors", {.mmap = mmap}).tensors.at("w");
    EXPECT_EQ(t.data<float>()[0], 1.5f);
    EXPECT_EQ(t.data<float>()[1], -2.25f);
  }
  const auto info = io::read_safetensors_header(dir / "p.safetensors");
  EXPECT_EQ(info.header_length, header.size());
  EXPECT_EQ(info.file_size, 8 + header.size() + 8);
  ASSERT_EQ(info.tensors.size(), 1u);
  EXPECT_EQ(info.tensors[0].name, "w");
  EXPECT_EQ(info.tensors[0].dtype, DType::F32);
  EXPECT_EQ(info.tensors[0].shape, (Shape{2}));
  EXPECT_EQ(info.tensors[0].begin, 0u);
  EXPECT_EQ(info.tensors[0].end, 8u);
}

TEST(SafetensorsIo, HugeHeaderLengthDoesNotOverflow) {
  // With the cap lifted, N = 2^64 - 1 must still be refused by the N <= size - 8 check
  // (N + 8 would wrap to 7 and pass a naive check).
  const std::string bytes = le64(UINT64_MAX) + "{}";
  EXPECT_THROW(io::parse_safetensors(std::as_bytes(std::span(bytes)), {.mmap = true, .max_header_bytes = UINT64_MAX}),
               ValueError);
}

// Random files (random dtypes, shapes, names, metadata): save then load gives back the same.
TEST(SafetensorsIo, RandomRoundTrips) {
  const TempDir dir;
  std::mt19937 rng(1234);
  for (int round = 0; round < 40; ++round) {
    std::map<std::string, Tensor> tensors;
    std::map<std::string, std::string> metadata;
    const int count = static_cast<int>(rng() % 6);
    for (int i = 0; i < count; ++i) {
      Shape shape(rng() % 4);
      for (auto& d : shape) d = static_cast<std::int64_t>(rng() % 5);
      const DType dtype = kAllDTypes[rng() % std::size(kAllDTypes)];
      tensors.emplace(str("t", rng() % 100), patterned(dtype, shape, static_cast<unsigned>(rng())));
    }
    if (rng() % 2) metadata["round"] = std::to_string(round);
    io::save_safetensors(dir / "r.safetensors", tensors, metadata);
    const bool mmap = rng() % 2;
    const auto loaded = io::read_safetensors(dir / "r.safetensors", {.mmap = mmap});
    io::SafetensorsFile expected{metadata, tensors};
    expect_same(expected, loaded);
  }
}

TEST(SafetensorsMapping, MappedLoadMatchesTheCopyingLoad) {
  const TempDir dir;
  std::map<std::string, Tensor> tensors;
  unsigned seed = 10;
  for (DType d : kAllDTypes) tensors.emplace(std::string(dtype_name(d)), patterned(d, {4, 3}, seed++));
  io::save_safetensors(dir / "a.safetensors", tensors, {{"k", "v"}});
  const auto mapped = io::read_safetensors(dir / "a.safetensors", {.mmap = true});
  const auto copied = io::read_safetensors(dir / "a.safetensors", {.mmap = false});
  expect_same(mapped, copied);
  for (const auto& [name, t] : mapped.tensors) EXPECT_TRUE(t.is_borrowed()) << name;
  for (const auto& [name, t] : copied.tensors) EXPECT_FALSE(t.is_borrowed()) << name;
}

// The tensor outlives its SafetensorsFile, every other tensor of the mapping and the deleted file.
TEST(SafetensorsMapping, MappedTensorsOutliveTheMap) {
  const TempDir dir;
  const Tensor original = patterned(DType::F32, {64, 64});
  io::save_safetensors(dir / "a.safetensors", {{"w", original}, {"b", patterned(DType::I8, {5})}});
  Tensor kept;
  {
    auto loaded = io::read_safetensors(dir / "a.safetensors", {.mmap = true});
    kept = loaded.tensors.at("w");
    ASSERT_TRUE(kept.is_borrowed());
  }  // the SafetensorsFile (and every other tensor) is gone
  fs::remove(dir / "a.safetensors");
  expect_same(original, kept);
}

TEST(SafetensorsMapping, WritingToAMappedTensorDoesNotChangeTheFile) {
  const TempDir dir;
  io::save_safetensors(dir / "a.safetensors", {{"w", patterned(DType::F32, {1024})}});
  const std::string before = read_file(dir / "a.safetensors");
  {
    auto loaded = io::read_safetensors(dir / "a.safetensors", {.mmap = true});
    Tensor& w = loaded.tensors.at("w");
    ASSERT_TRUE(w.is_borrowed());
    for (std::int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = 42.0f;
    EXPECT_EQ(w.data<float>()[7], 42.0f);
    EXPECT_EQ(read_file(dir / "a.safetensors"), before);  // while the mapping is alive
    const auto other = io::read_safetensors(dir / "a.safetensors", {.mmap = true});
    EXPECT_NE(other.tensors.at("w").data<float>()[7], 42.0f);  // a second mapping sees the file
  }
  EXPECT_EQ(read_file(dir / "a.safetensors"), before);
}

TEST(SafetensorsMapping, SavingOverTheFileBehindAMappedTensorKeepsItValid) {
  const TempDir dir;
  const Tensor old_w = patterned(DType::F32, {256}, 1), new_w = patterned(DType::F32, {16}, 2);
  io::save_safetensors(dir / "a.safetensors", {{"w", old_w}});
  const Tensor mapped = io::read_safetensors(dir / "a.safetensors", {.mmap = true}).tensors.at("w");
  ASSERT_TRUE(mapped.is_borrowed());
  io::save_safetensors(dir / "a.safetensors", {{"w", new_w}});
  expect_same(old_w, mapped);
  expect_same(new_w, io::read_safetensors(dir / "a.safetensors").tensors.at("w"));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.safetensors"});
}

// Aligned tensors are built over the one mapping, as far apart in memory as in the file.
TEST(SafetensorsMapping, MappedLoadSharesTheFilePagesWhenAligned) {
  const TempDir dir;
  const Tensor a = patterned(DType::F32, {4}, 1), b = patterned(DType::F32, {4}, 2);
  io::save_safetensors(dir / "a.safetensors", {{"a", a}, {"b", b}});
  const auto info = io::read_safetensors_header(dir / "a.safetensors");
  ASSERT_EQ(info.tensors.size(), 2u);
  const auto offset_of = [&](const std::string& name) {
    for (const auto& t : info.tensors)
      if (t.name == name) return static_cast<std::ptrdiff_t>(t.begin);
    throw std::out_of_range(name);
  };
  const auto loaded = io::read_safetensors(dir / "a.safetensors", {.mmap = true});
  const Tensor& la = loaded.tensors.at("a");
  const Tensor& lb = loaded.tensors.at("b");
  ASSERT_TRUE(la.is_borrowed());
  ASSERT_TRUE(lb.is_borrowed());
  EXPECT_EQ(std::abs(offset_of("b") - offset_of("a")), 16);  // 4 floats apart in the file
  EXPECT_EQ(static_cast<const std::byte*>(lb.raw_data()) - static_cast<const std::byte*>(la.raw_data()),
            offset_of("b") - offset_of("a"));
  expect_same(a, la);
  expect_same(b, lb);
}

// A tensor whose file position is not a multiple of its element size is copied into aligned
// memory; one that is aligned in the same file is still mapped.
TEST(SafetensorsMapping, MappedLoadCopiesMisalignedTensors) {
  const TempDir dir;
  double values[2] = {0.1, -7.5};
  const std::string data(reinterpret_cast<const char*>(values), sizeof values);
  for (std::size_t start = 1; start < 8; ++start) {  // data section start modulo 8
    SCOPED_TRACE(start);
    std::string header = R"({"d":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},"f":{"dtype":"F32","shape":[1],"data_offsets":[16,20]}})";
    while ((8 + header.size()) % 8 != start) header += ' ';
    write_file(dir / "m.safetensors", le64(header.size()) + header + data + std::string(4, '\0'));
    const auto loaded = io::read_safetensors(dir / "m.safetensors", {.mmap = true});
    const Tensor& d = loaded.tensors.at("d");
    EXPECT_FALSE(d.is_borrowed());
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(d.raw_data()) % alignof(double), 0u);
    EXPECT_EQ(d.data<double>()[0], 0.1);
    EXPECT_EQ(d.data<double>()[1], -7.5);
    EXPECT_EQ(loaded.tensors.at("f").is_borrowed(), start % 4 == 0);
  }
}

TEST(SafetensorsMapping, MappingCanBeTurnedOff) {
  const TempDir dir;
  io::save_safetensors(dir / "a.safetensors", {{"w", patterned(DType::F64, {8})}});
  const auto loaded = io::read_safetensors(dir / "a.safetensors", {.mmap = false});
  EXPECT_FALSE(loaded.tensors.at("w").is_borrowed());
}

// Refused before any file is created.
TEST(SafetensorsSave, NamesCannotBeTheMetadataKey) {
  const TempDir dir;
  EXPECT_THROW(io::save_safetensors(dir / "new.safetensors", {{"__metadata__", patterned(DType::F32, {2})}}), ValueError);
  EXPECT_TRUE(dir.entries().empty());
}

// Names, metadata keys and metadata values alike; refused before any file is created.
TEST(SafetensorsSave, SavingANameThatIsNotUtf8IsAValueError) {
  const TempDir dir;
  const Tensor t = patterned(DType::F32, {2});
  EXPECT_THROW(io::save_safetensors(dir / "new.safetensors", {{"bad\xff", t}}), ValueError);
  EXPECT_THROW(io::save_safetensors(dir / "new.safetensors", {{"ok", t}}, {{"k", "\xc0\x80"}}), ValueError);
  EXPECT_THROW(io::save_safetensors(dir / "new.safetensors", {{"ok", t}}, {{"\xed\xa0\x80", "v"}}), ValueError);
  EXPECT_TRUE(dir.entries().empty());
}

// The book's refused save, and also (beyond the book) a write that fails after the temporary file
// has been written.
TEST(SafetensorsSave, AFailedSaveLeavesTheExistingFileIntact) {
  const TempDir dir;
  io::save_safetensors(dir / "a.safetensors", {{"w", patterned(DType::U8, {16})}});
  const std::string before = read_file(dir / "a.safetensors");
  EXPECT_THROW(io::save_safetensors(dir / "a.safetensors", {{"__metadata__", patterned(DType::U8, {4})}}), ValueError);
  EXPECT_EQ(read_file(dir / "a.safetensors"), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.safetensors"});
  // Make writes past 4 KiB fail with EFBIG (instead of killing the process with SIGXFSZ).
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto* old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  EXPECT_THROW(io::save_safetensors(dir / "a.safetensors", {{"w", patterned(DType::U8, {1 << 20})}}), Error);
  ::setrlimit(RLIMIT_FSIZE, &saved);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(read_file(dir / "a.safetensors"), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.safetensors"});
}

// After a save, a save over the file, and a save whose rename fails.
TEST(SafetensorsSave, SavingLeavesNoTemporaryFilesBehind) {
  const TempDir dir;
  io::save_safetensors(dir / "a.safetensors", {{"w", patterned(DType::U8, {4})}});
  io::save_safetensors(dir / "a.safetensors", {{"w", patterned(DType::U8, {8})}});
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.safetensors"});
  fs::remove(dir / "a.safetensors");
  fs::create_directories(dir / "target.safetensors" / "inside");  // rename cannot replace a non-empty directory
  EXPECT_THROW(io::save_safetensors(dir / "target.safetensors", {{"w", patterned(DType::U8, {4})}}), Error);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"target.safetensors"});
  EXPECT_THROW(io::save_safetensors(dir / "missing_dir" / "x.safetensors", {}), Error);
}

TEST(SafetensorsSave, KeepsTheModeOfTheFileItReplaces) {
  const TempDir dir;
  io::save_safetensors(dir / "a.safetensors", {});
  EXPECT_EQ(fs::status(dir / "a.safetensors").permissions(),
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
  fs::permissions(dir / "a.safetensors", fs::perms::owner_read | fs::perms::owner_write);
  io::save_safetensors(dir / "a.safetensors", {});
  EXPECT_EQ(fs::status(dir / "a.safetensors").permissions(), fs::perms::owner_read | fs::perms::owner_write);
}

// A mapped file truncated under its reader: the pages past the new end read as zeros instead
// of killing the process with SIGBUS, and check_mappings_intact reports it.
TEST(SafetensorsMapping, TruncatedMappedFileReadsZerosAndIsReported) {
  const TempDir dir;
  const Tensor w = patterned(DType::F32, {1 << 16}, 3);  // 256 KiB: many pages
  io::save_safetensors(dir / "a.safetensors", {{"w", w}});
  const Tensor mapped = io::read_safetensors(dir / "a.safetensors", {.mmap = true}).tensors.at("w");
  ASSERT_TRUE(mapped.is_borrowed());
  EXPECT_NO_THROW(io::check_mappings_intact("before"));
  fs::resize_file(dir / "a.safetensors", 4096);
  const auto* values = static_cast<const float*>(static_cast<const void*>(mapped.raw_data()));
  std::int64_t zeros = 0;
  for (std::int64_t i = 0; i < mapped.numel(); ++i) zeros += values[i] == 0.0f;  // each page was a SIGBUS
  EXPECT_EQ(values[mapped.numel() - 1], 0.0f);
  EXPECT_GE(zeros, mapped.numel() - 4096 / 4);  // all but the first page's worth
  try {
    io::check_mappings_intact("'a.safetensors'");
    FAIL() << "a shrunken mapping was not reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'a.safetensors' shrank"), std::string::npos) << e.what();
  }
}

TEST(SafetensorsLoad, NonRegularFilesAreRefusedWithoutBlocking) {
  const TempDir dir;
  const fs::path fifo = dir / "fifo.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const fs::path& path : {fifo, dir.path()}) {
    try {
      io::read_safetensors(path, io::LoadMode::Mapped);  // a plain open() of the FIFO would block here forever
      FAIL() << path << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is not a regular file"), std::string::npos) << e.what();
    }
  }
}
