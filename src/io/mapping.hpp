// A private (copy-on-write) memory map of a whole file. Tensors that point into it hold a
// shared_ptr to it, so it is unmapped only when the last of them is gone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace kael::io {

class Mapping {
 public:
  // Maps `size` bytes of `fd` readable and writable but private: writes go to private copies
  // of the pages and never reach the file. Returns null when the system refuses (the caller
  // then reads the file instead).
  static std::shared_ptr<Mapping> map(int fd, std::uint64_t size);
  ~Mapping();
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  std::byte* data() const { return data_; }
  std::uint64_t size() const { return size_; }

 private:
  Mapping(std::byte* data, std::uint64_t size) : data_(data), size_(size) {}
  std::byte* data_;
  std::uint64_t size_;
};

}  // namespace kael::io
