// A read-only file descriptor with exact positional reads; closes itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace kael::io {

class PosixFile {
 public:
  // Opens a regular file for reading, without blocking on a FIFO or device (kael/core/file.hpp);
  // throws Error naming the path (and `what` it is) when it cannot.
  explicit PosixFile(const std::filesystem::path& path, std::string_view what = "safetensors file");
  ~PosixFile();
  PosixFile(const PosixFile&) = delete;
  PosixFile& operator=(const PosixFile&) = delete;

  int fd() const { return fd_; }
  // The current size (fstat), so callers can see whether it changed since they last looked.
  std::uint64_t size() const;
  // Fills `out` from `offset`; throws ValueError if the file ends first (it shrank), Error on I/O errors.
  void read_exact(std::uint64_t offset, std::span<std::byte> out) const;

 private:
  std::string name_;
  int fd_ = -1;
};

}  // namespace kael::io
