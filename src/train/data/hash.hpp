// A 64-bit hash for cache keys and file checksums (not cryptographic: it guards against
// accidents, such as a truncated cache file, not against tampering).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "kernels/random.hpp"  // mix64, the counter-based generator's finalizer

namespace kael::train {

class Hash64 {
 public:
  // Adds bytes, 8 at a time (a shorter tail byte by byte).
  void update(std::span<const std::byte> bytes) {
    std::size_t i = 0;
    for (; i + 8 <= bytes.size(); i += 8) {
      std::uint64_t word;
      std::memcpy(&word, bytes.data() + i, 8);
      mix(word);
    }
    for (; i < bytes.size(); ++i) mix(static_cast<std::uint64_t>(bytes[i]) | 0x100);
  }
  void update(std::string_view text) { update(std::as_bytes(std::span(text.data(), text.size()))); }
  std::uint64_t digest() const { return kernels::mix64(state_ ^ count_); }

 private:
  void mix(std::uint64_t word) {
    state_ = kernels::mix64(state_ ^ word);
    ++count_;
  }
  std::uint64_t state_ = 0x6a09e667f3bcc908ULL;
  std::uint64_t count_ = 0;
};

}  // namespace kael::train
