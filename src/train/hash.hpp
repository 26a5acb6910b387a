// A 64-bit hash for cache keys and file checksums (not cryptographic: it guards against
// accidents, such as a truncated cache file, not against tampering).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace kael::train {

class Hash64 {
 public:
  // Adds bytes; the result depends on every byte and on where the calls split them only through
  // their content (update("ab") equals update("a"), update("b")) when the splits are multiples of 8.
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
  std::uint64_t digest() const { return finalize(state_ ^ count_); }

 private:
  // splitmix64's finalizer: every input bit reaches every output bit.
  static std::uint64_t finalize(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  void mix(std::uint64_t word) {
    state_ = finalize(state_ ^ word) + 0x9e3779b97f4a7c15ULL;
    ++count_;
  }
  std::uint64_t state_ = 0x6a09e667f3bcc908ULL;
  std::uint64_t count_ = 0;
};

}  // namespace kael::train
