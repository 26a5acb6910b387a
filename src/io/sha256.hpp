// Internal to src/io: SHA-256 fed in pieces (kael/io/checksums.hpp has the one-call forms).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

namespace kael::io {

class Sha256 {
 public:
  Sha256();
  void update(std::span<const std::byte> bytes);
  // Pads and finishes; the object is spent afterwards.
  std::string hex_digest();

 private:
  void compress();  // hashes block_ (64 bytes) into state_

  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> block_{};
  std::size_t block_size_ = 0;
  std::uint64_t total_bytes_ = 0;
};

}  // namespace kael::io
