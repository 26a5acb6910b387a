// One hand-made hostile file per way a safetensors file can be wrong (docs/behaviour.md,
// "safetensors"). Each must be refused with the right error type and a message naming the problem,
// by the in-memory parser and by both file loaders (mapped and copying); a control case must load.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <typeinfo>

#include "kael/core/error.hpp"
#include "kael/io/safetensors.hpp"

using namespace kael;

namespace {

std::string le64(std::uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out;
}
// A file: length prefix, the header as given, then the data bytes.
std::string file(const std::string& header, const std::string& data = "") { return le64(header.size()) + header + data; }
// One entry's JSON.
std::string entry(const std::string& name, const std::string& dtype, const std::string& shape, const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
}
// The smallest valid file: one F32 scalar.
const std::string kF32 = entry("a", "F32", "[]", "[0,4]");

enum class Kind { Value, Type };
struct Malformed {
  std::string name;
  std::string bytes;
  Kind kind;
  std::string message;  // a fragment the message must contain
};
// GoogleTest prints the case by name instead of dumping its bytes.
void PrintTo(const Malformed& c, std::ostream* out) { *out << c.name; }

std::vector<Malformed> cases() {
  const std::string four(4, '\0');
  const std::string deep = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  return {
      // Framing.
      {"EmptyFile", "", Kind::Value, "too short"},
      {"TruncatedLengthPrefix", std::string(7, '\0'), Kind::Value, "too short"},
      {"LengthMax", le64(UINT64_MAX) + "{}", Kind::Value, "exceeds the limit"},
      {"HeaderLongerThanFile", le64(100) + "{\"a\":1}", Kind::Value, "runs past the end"},
      {"HeaderLongerThanFileByOne", le64(3) + "{}", Kind::Value, "runs past the end"},
      {"LengthZero", le64(0) + "{}", Kind::Value, "header length is 0"},
      {"GitLfsPointer",
       "version https://git-lfs.github.com/spec/v1\noid sha256:248dfc3911869ec493c76e65bf2fcf7f615828b0254c12b473182f0f81d3a707\nsize 548105171\n",
       Kind::Value, "Git LFS pointer"},
      // JSON syntax and encoding.
      {"NotJson", file("{not json}"), Kind::Value, "not valid JSON"},
      {"NotAnObject", file("[1,2]"), Kind::Value, "must start with '{'"},
      {"LeadingGarbage", file("x{}"), Kind::Value, "must start with '{'"},
      {"TrailingGarbage", file("{}x"), Kind::Value, "not valid JSON"},
      // nlohmann alone would take the first NUL for the end of the input.
      {"NulPadding", file("{" + kF32 + "}" + std::string(3, '\0'), four), Kind::Value, "NUL byte at header offset"},
      {"NulBeforeObject", file(std::string(1, '\0') + "{" + kF32 + "}", four), Kind::Value, "NUL byte"},
      {"FormFeedBeforeObject", file("\f{" + kF32 + "}", four), Kind::Value, "must start with '{'"},
      {"ByteOrderMark", file("\xef\xbb\xbf{" + kF32 + "}", four), Kind::Value, "must start with '{'"},
      {"OnlyWhitespace", file("  "), Kind::Value, "found nothing"},
      {"TwoDocuments", file("{}{}"), Kind::Value, "not valid JSON"},
      {"TruncatedJson", file("{\"a\":"), Kind::Value, "not valid JSON"},
      {"Comment", file("{/*c*/}"), Kind::Value, "not valid JSON"},
      {"ControlCharInString", file("{\"a\x01\":1}"), Kind::Value, "not valid JSON"},
      {"LoneSurrogateEscape", file("{\"\\ud800\":1}"), Kind::Value, "not valid JSON"},
      {"InvalidUtf8", file("{\"\xff\":1}"), Kind::Value, "not valid UTF-8"},
      {"OverlongUtf8", file("{\"\xc0\xaf\":1}"), Kind::Value, "not valid UTF-8"},
      {"Utf8Surrogate", file("{\"\xed\xa0\x80\":1}"), Kind::Value, "not valid UTF-8"},
      {"TruncatedUtf8", file("{\"a\":1}\xe2\x82"), Kind::Value, "not valid UTF-8"},
      {"DeeplyNested", file(deep), Kind::Value, "nests deeper"},
      {"DuplicateTensor", file("{" + kF32 + "," + kF32 + "}", four), Kind::Value, "repeats the key \"a\""},
      {"DuplicateField", file("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", four),
       Kind::Value, "repeats the key \"dtype\""},
      // Wrong JSON types in entries.
      {"EntryNotObject", file("{\"a\":1}"), Kind::Value, "expected an object"},
      {"EntryArray", file("{\"a\":[\"F32\",[],[0,4]]}", four), Kind::Value, "expected an object"},
      {"MissingDtype", file("{\"a\":{\"shape\":[],\"data_offsets\":[0,4]}}", four), Kind::Value, "no \"dtype\""},
      {"MissingShape", file("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", four), Kind::Value, "no \"shape\""},
      {"MissingOffsets", file("{\"a\":{\"dtype\":\"F32\",\"shape\":[]}}", four), Kind::Value, "no \"data_offsets\""},
      {"UnknownField", file("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],\"x\":1}}", four),
       Kind::Value, "unknown field"},
      {"DtypeNotString", file("{\"a\":{\"dtype\":4,\"shape\":[],\"data_offsets\":[0,4]}}", four), Kind::Value,
       "expected a string"},
      // Dtypes.
      {"UnknownDtype", file("{" + entry("a", "F17", "[]", "[0,4]") + "}", four), Kind::Type, "unsupported dtype \"F17\""},
      // The book's unsupported dtype is F16; kael reads F16 and BF16, and F8 is what it lacks.
      {"UnsupportedDtypeIsATypeError", file("{" + entry("a", "F8_E4M3", "[4]", "[0,4]") + "}", four), Kind::Type, "F8_E4M3"},
      {"LowercaseDtype", file("{" + entry("a", "f32", "[]", "[0,4]") + "}", four), Kind::Type, "\"f32\""},
      // Shapes.
      {"ShapeNotArray", file("{" + entry("a", "F32", "1", "[0,4]") + "}", four), Kind::Value, "expected an array"},
      {"NegativeDim", file("{" + entry("a", "F32", "[-1]", "[0,4]") + "}", four), Kind::Value, "non-negative"},
      {"MinusZeroDim", file("{" + entry("a", "F32", "[-0]", "[0,0]") + "}"), Kind::Value, "is -0"},
      {"FractionalDim", file("{" + entry("a", "F32", "[1.5]", "[0,4]") + "}", four), Kind::Value, "expected an integer"},
      {"IntegralFloatDim", file("{" + entry("a", "F32", "[1.0]", "[0,4]") + "}", four), Kind::Value, "expected an integer"},
      {"ExponentDim", file("{" + entry("a", "F32", "[1e0]", "[0,4]") + "}", four), Kind::Value, "expected an integer"},
      {"StringDim", file("{" + entry("a", "F32", "[\"1\"]", "[0,4]") + "}", four), Kind::Value, "JSON string"},
      {"NullDim", file("{" + entry("a", "F32", "[null]", "[0,4]") + "}", four), Kind::Value, "JSON null"},
      {"NestedDim", file("{" + entry("a", "F32", "[[1]]", "[0,4]") + "}", four), Kind::Value, "JSON array"},
      {"DimPastInt64", file("{" + entry("a", "U8", "[9223372036854775808]", "[0,4]") + "}", four), Kind::Value,
       "int64 maximum"},
      {"ShapeOverflow", file("{" + entry("a", "U8", "[4294967296,4294967296,2]", "[0,4]") + "}", four), Kind::Value,
       "more than 2^63 elements"},
      // 4 * (2^62 + 1) = 2^64 + 4, which wraps to exactly the 4 bytes the offsets hold.
      {"ShapeWrapsToSize", file("{" + entry("a", "U8", "[4611686018427387905,4]", "[0,4]") + "}", four), Kind::Value,
       "more than 2^63 elements"},
      // numel 2^62 + 1 fits, but times 4 bytes it wraps to 4.
      {"BytesWrapToSize", file("{" + entry("a", "F32", "[4611686018427387905]", "[0,4]") + "}", four), Kind::Value,
       "more than 2^64 bytes"},
      // Offsets.
      {"OffsetsNotArray", file("{" + entry("a", "F32", "[]", "4") + "}", four), Kind::Value, "expected [begin, end]"},
      {"OneOffset", file("{" + entry("a", "F32", "[]", "[4]") + "}", four), Kind::Value, "expected [begin, end]"},
      {"ThreeOffsets", file("{" + entry("a", "F32", "[]", "[0,4,4]") + "}", four), Kind::Value, "expected [begin, end]"},
      {"ReversedOffsets", file("{" + entry("a", "F32", "[]", "[4,0]") + "}", four), Kind::Value, "reversed"},
      {"NegativeOffset", file("{" + entry("a", "F32", "[]", "[-4,0]") + "}", four), Kind::Value, "non-negative"},
      {"MinusZeroOffset", file("{" + entry("a", "F32", "[0]", "[-0,0]") + "}"), Kind::Value, "is -0"},
      {"FractionalOffset", file("{" + entry("a", "F32", "[]", "[0,4.0]") + "}", four), Kind::Value, "expected an integer"},
      {"HugeOffsets",
       file("{" + entry("a", "U8", "[4]", "[9223372036854775800,9223372036854775804]") + "}", four), Kind::Value,
       "extend past the data section"},
      {"OffsetPastUint64", file("{" + entry("a", "U8", "[4]", "[0,18446744073709551620]") + "}", four), Kind::Value,
       "expected an integer"},
      {"SizeMismatch", file("{" + entry("a", "F32", "[2]", "[0,4]") + "}", four), Kind::Value, "needs 8 bytes"},
      {"DataTruncated", file("{" + entry("a", "F32", "[2]", "[0,8]") + "}", four), Kind::Value,
       "extend past the data section"},
      {"Gap", file("{" + entry("a", "F32", "[]", "[0,4]") + "," + entry("b", "F32", "[]", "[8,12]") + "}",
                   std::string(12, '\0')),
       Kind::Value, "belong to no tensor"},
      {"GapAtStart", file("{" + entry("a", "F32", "[]", "[4,8]") + "}", std::string(8, '\0')), Kind::Value,
       "belong to no tensor"},
      {"Overlap", file("{" + entry("a", "F32", "[2]", "[0,8]") + "," + entry("b", "F32", "[2]", "[4,12]") + "}",
                       std::string(12, '\0')),
       Kind::Value, "overlaps"},
      {"Aliasing", file("{" + entry("a", "F32", "[]", "[0,4]") + "," + entry("b", "F32", "[]", "[0,4]") + "}", four),
       Kind::Value, "aliases"},
      {"EmptyInsideAnother",
       file("{" + entry("a", "F32", "[2]", "[0,8]") + "," + entry("b", "F32", "[0]", "[4,4]") + "}", std::string(8, '\0')),
       Kind::Value, "overlaps"},
      {"TrailingBytes", file("{" + kF32 + "}", std::string(8, '\0')), Kind::Value, "4 trailing bytes"},
      {"DataWithoutTensors", file("{}", four), Kind::Value, "4 trailing bytes"},
      // Metadata.
      {"MetadataNotObject", file("{\"__metadata__\":[\"a\"]}"), Kind::Value, "__metadata__"},
      {"MetadataNumber", file("{\"__metadata__\":{\"k\":1}}"), Kind::Value, "expected a string"},
      {"MetadataNested", file("{\"__metadata__\":{\"k\":{\"x\":\"y\"}}}"), Kind::Value, "expected a string"},
      // Data.
      {"InvalidBoolBytesAreRejected", file("{" + entry("a", "BOOL", "[4]", "[0,4]") + "}", std::string("\x01\x00\x02\x01", 4)),
       Kind::Value, "holds byte 2 at element 2"},
  };
}

class TempFile {
 public:
  explicit TempFile(const std::string& bytes) {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            str("kael_malformed_", ::getpid(), "_", counter++, ".safetensors");
    std::ofstream(path_, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  ~TempFile() { std::filesystem::remove(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Runs `load` and checks it throws exactly the expected kind with the expected message fragment.
template <class Load>
void expect_refused(const Malformed& c, const char* how, Load load) {
  SCOPED_TRACE(how);
  try {
    load();
    ADD_FAILURE() << c.name << " was accepted";
  } catch (const TypeError& e) {
    EXPECT_EQ(c.kind, Kind::Type) << "TypeError: " << e.what();
    EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
  } catch (const ValueError& e) {
    EXPECT_EQ(c.kind, Kind::Value) << "ValueError: " << e.what();
    EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

std::span<const std::byte> as_bytes(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

}  // namespace

// The book's Corrupt/BadHeader cases all raise ValueError; kael's table also holds framing and
// data cases, and its dtype cases are TypeErrors.
class BadHeader : public ::testing::TestWithParam<Malformed> {};

TEST_P(BadHeader, IsRejected) {
  const Malformed& c = GetParam();
  expect_refused(c, "parse_safetensors", [&] { io::parse_safetensors(as_bytes(c.bytes)); });
  const TempFile temp(c.bytes);
  expect_refused(c, "copying load", [&] { io::read_safetensors(temp.path(), {.mmap = false}); });
  // The header reader sees everything but the BOOL bytes.
  if (c.name != "InvalidBoolBytesAreRejected") expect_refused(c, "header", [&] { io::read_safetensors_header(temp.path()); });
}

// The same error, type and message, from the mapped load as from the copying one.
TEST_P(BadHeader, MappedLoadRejectsCorruptFilesLikeTheCopyingLoad) {
  const Malformed& c = GetParam();
  const TempFile temp(c.bytes);
  expect_refused(c, "mapped load", [&] { io::read_safetensors(temp.path(), {.mmap = true}); });
  const auto message = [&](bool mmap) -> std::string {
    try {
      io::read_safetensors(temp.path(), {.mmap = mmap});
    } catch (const Error& e) {
      return str(typeid(e).name(), ": ", e.what());
    }
    return "accepted";
  };
  EXPECT_EQ(message(true), message(false));
}

INSTANTIATE_TEST_SUITE_P(Corrupt, BadHeader, ::testing::ValuesIn(cases()), [](const auto& info) { return info.param.name; });

TEST(MalformedFile, TableHasOneCasePerKindAndUniqueNames) {
  const auto all = cases();
  EXPECT_GE(all.size(), 40u);
  std::set<std::string> names;
  for (const auto& c : all) EXPECT_TRUE(names.insert(c.name).second) << c.name;
}

// The controls: files the builders above make when nothing is wrong, so each case fails for its
// own reason and not because the helpers are broken. The reference reader loads each of them.
struct Valid {
  std::string name;
  std::string bytes;
};

std::vector<Valid> valid_files() {
  return {
      {"OneF32", file("{" + kF32 + "}", std::string("\x00\x00\x80\x3f", 4))},
      {"TwoTensors", file("{" + entry("a", "F32", "[]", "[0,4]") + "," + entry("b", "F32", "[2]", "[4,12]") + "}",
                          std::string(12, '\0'))},
      {"Bools", file("{" + entry("a", "BOOL", "[4]", "[0,4]") + "}", std::string("\x01\x00\x00\x01", 4))},
      {"TwoEmpties", file("{" + entry("a", "F32", "[0]", "[0,0]") + "," + entry("b", "F32", "[0]", "[0,0]") + "}")},
      {"Metadata", file("{\"__metadata__\":{\"k\":\"v\"}}")},
      {"MetadataNull", file("{\"__metadata__\":null," + kF32 + "}", std::string(4, '\0'))},
      // JSON whitespace may stand before and after the object (the writer pads with spaces).
      {"WhitespaceAround", file(" \t\n\r{" + kF32 + "}  \n\t ", std::string(4, '\0'))},
  };
}

std::string valid(const std::string& name) {
  for (const Valid& v : valid_files())
    if (v.name == name) return v.bytes;
  throw std::out_of_range(name);
}

TEST(MalformedFile, ControlFilesLoad) {
  for (const Valid& v : valid_files()) {
    SCOPED_TRACE(v.name);
    EXPECT_NO_THROW(io::parse_safetensors(as_bytes(v.bytes)));
    const TempFile temp(v.bytes);
    EXPECT_NO_THROW(io::read_safetensors(temp.path(), {.mmap = true}));
    EXPECT_NO_THROW(io::read_safetensors(temp.path(), {.mmap = false}));
  }
  EXPECT_FLOAT_EQ(io::parse_safetensors(as_bytes(valid("OneF32"))).tensors.at("a").value_as_double(0), 1.0);
  EXPECT_EQ(io::parse_safetensors(as_bytes(valid("TwoTensors"))).tensors.size(), 2u);
  EXPECT_EQ(io::parse_safetensors(as_bytes(valid("Bools"))).tensors.at("a").numel(), 4);
  EXPECT_EQ(io::parse_safetensors(as_bytes(valid("TwoEmpties"))).tensors.size(), 2u);
  EXPECT_EQ(io::parse_safetensors(as_bytes(valid("Metadata"))).metadata.at("k"), "v");
  EXPECT_TRUE(io::parse_safetensors(as_bytes(valid("MetadataNull"))).metadata.empty());
  EXPECT_EQ(io::parse_safetensors(as_bytes(valid("WhitespaceAround"))).tensors.at("a").shape(), Shape{});
  // Nesting just under the limit is a type error, not a nesting error.
  const std::string nested = file("{\"a\":" + std::string(15, '[') + std::string(15, ']') + "}");
  try {
    io::parse_safetensors(as_bytes(nested));
    ADD_FAILURE() << "accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("expected an object"), std::string::npos) << e.what();
  }
}

// With KAEL_CONFORMANCE_DIR set, writes every malformed case and every control there as
// NAME.safetensors, with verdicts.txt holding "NAME refuse" or "NAME accept" a line, for
// tests/python/test_safetensors_conformance.py to run through the reference package and kael.
TEST(MalformedFile, WritesEveryCaseForTheReference) {
  const char* dir = std::getenv("KAEL_CONFORMANCE_DIR");
  if (!dir) GTEST_SKIP() << "KAEL_CONFORMANCE_DIR is not set (the pytest conformance test sets it)";
  const std::filesystem::path out(dir);
  std::ofstream verdicts(out / "verdicts.txt");
  const auto write = [&](const std::string& name, const std::string& bytes, const char* verdict) {
    std::ofstream(out / (name + ".safetensors"), std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    verdicts << name << ' ' << verdict << '\n';
  };
  for (const Malformed& c : cases()) write(c.name, c.bytes, "refuse");
  for (const Valid& v : valid_files()) write(v.name, v.bytes, "accept");
  ASSERT_TRUE(verdicts.good());
}

TEST(MalformedFile, HeaderCapIsConfigurable) {
  const std::string f32 = file("{" + kF32 + "}", std::string(4, '\0'));
  const std::uint64_t n = f32.size() - 12;
  EXPECT_NO_THROW(io::parse_safetensors(as_bytes(f32), {.mmap = true, .max_header_bytes = n}));
  EXPECT_THROW(io::parse_safetensors(as_bytes(f32), {.mmap = true, .max_header_bytes = n - 1}), ValueError);
  const TempFile temp(f32);
  EXPECT_THROW(io::read_safetensors(temp.path(), {.mmap = true, .max_header_bytes = n - 1}), ValueError);
}

// An Error naming the file, not a ValueError: a missing file is not a malformed one.
TEST(MalformedFile, MissingFile) {
  const auto missing = std::filesystem::temp_directory_path() / "kael_no_such_file.safetensors";
  for (bool mmap : {true, false}) {
    try {
      io::read_safetensors(missing, {.mmap = mmap});
      ADD_FAILURE() << "accepted";
    } catch (const ValueError&) {
      ADD_FAILURE() << "a missing file is not a malformed file";
    } catch (const TypeError&) {
      ADD_FAILURE() << "wrong type";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("kael_no_such_file"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(io::read_safetensors(std::filesystem::temp_directory_path()), Error);  // a directory
}
