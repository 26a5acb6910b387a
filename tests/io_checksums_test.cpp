// SHA-256 against digests from Python's hashlib (lengths around the 55/56/64-byte padding edges and
// a 1,000,000-byte message), and SHA256SUMS checking: a good directory, a damaged byte, a missing
// file, a malformed line.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/io/checksums.hpp"

using namespace kael;
namespace fs = std::filesystem;

namespace {

// Bytes (i * 7 + 3) mod 256, i = 0 .. n-1.
std::vector<std::byte> pattern(std::size_t n) {
  std::vector<std::byte> bytes(n);
  for (std::size_t i = 0; i < n; ++i) bytes[i] = static_cast<std::byte>((i * 7 + 3) % 256);
  return bytes;
}

void write(const fs::path& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

class ChecksumDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kael_checksums_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write(dir_ / "a.txt", "abc");
    write(dir_ / "empty.bin", "");
    write(dir_ / "SHA256SUMS",
          "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  a.txt\n"
          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 *empty.bin\n");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The message of the error verify_sha256sums throws ("" if none).
  std::string failure() const {
    try {
      io::verify_sha256sums(dir_);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

}  // namespace

TEST(Sha256, MatchesHashlibAcrossPaddingEdges) {
  const std::vector<std::pair<std::size_t, std::string>> expected = {
      {0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {1, "084fed08b978af4d7d196a7446a86b58009e636b611db16211b65a9aadff29c5"},
      {55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"},
      {56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"},
      {63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"},
      {64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"},
      {65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"},
      {119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"},
      {120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"},
      {1000, "1e9bc38cbf860b9ec31918b065f9b52476c549a782e0e7990bed8ce3868d2371"},
  };
  for (const auto& [n, hex] : expected) EXPECT_EQ(io::sha256_hex(pattern(n)), hex) << n << " bytes";
  const std::string million(1'000'000, 'a');  // FIPS 180-2's long test vector
  EXPECT_EQ(io::sha256_hex(std::as_bytes(std::span(million.data(), million.size()))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_F(ChecksumDir, FileHashEqualsInMemoryHash) {
  const auto bytes = pattern(200'000);  // several 64 KiB reads
  std::ofstream(dir_ / "big.bin", std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  EXPECT_EQ(io::sha256_file_hex(dir_ / "big.bin"), io::sha256_hex(bytes));
  EXPECT_THROW(io::sha256_file_hex(dir_ / "absent.bin"), Error);
}

TEST_F(ChecksumDir, AcceptsMatchingFiles) { EXPECT_EQ(failure(), ""); }

TEST_F(ChecksumDir, DamagedByteNamesTheFile) {
  write(dir_ / "a.txt", "abd");
  const std::string message = failure();
  EXPECT_NE(message.find("a.txt' is damaged"), std::string::npos) << message;
  EXPECT_NE(message.find("ba7816bf"), std::string::npos) << message;
}

TEST_F(ChecksumDir, MissingListedFileNamesIt) {
  fs::remove(dir_ / "empty.bin");
  const std::string message = failure();
  EXPECT_NE(message.find("empty.bin' is missing"), std::string::npos) << message;
}

TEST_F(ChecksumDir, AListedNameThatIsNotARegularFileSaysWhatItIs) {
  fs::remove(dir_ / "empty.bin");
  ASSERT_EQ(::mkfifo((dir_ / "empty.bin").c_str(), 0600), 0);  // no writer: never opened as a file would be
  const std::string message = failure();
  EXPECT_NE(message.find("empty.bin' is not a regular file (it is a FIFO)"), std::string::npos) << message;
  fs::remove(dir_ / "empty.bin");
  fs::create_directory(dir_ / "empty.bin");
  EXPECT_NE(failure().find("is not a regular file (it is a directory)"), std::string::npos) << failure();
}

TEST_F(ChecksumDir, RefusesMalformedOrMissingSums) {
  for (const std::string& bad : std::vector<std::string>{"ba7816bf  a.txt\n", std::string(64, 'A') + "  a.txt\n",
                                std::string(64, '0') + "  ../a.txt\n", std::string(64, '0') + "\n", "\n"}) {
    write(dir_ / "SHA256SUMS", bad);
    EXPECT_NE(failure(), "") << bad;
  }
  fs::remove(dir_ / "SHA256SUMS");
  EXPECT_NE(failure().find("SHA256SUMS"), std::string::npos);
  // A FIFO in its place (or in a listed file's) is refused at once, never waited on.
  ASSERT_EQ(::mkfifo((dir_ / "SHA256SUMS").c_str(), 0600), 0);
  EXPECT_NE(failure().find("not a regular file"), std::string::npos) << failure();
  EXPECT_THROW(io::sha256_file_hex(dir_ / "SHA256SUMS"), Error);
}
