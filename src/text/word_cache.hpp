// Remembers the ids of pieces that took BPE, so a repeated word costs one hash lookup. Each
// thread has its own (no locks on the hot path); it is cleared when it grows past a bound so
// a long stream of distinct words cannot grow memory without limit.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "text/flat_maps.hpp"

namespace kael::text {

class WordCache {
 public:
  // Pieces longer than this are not cached (rarely repeated, and costly to copy).
  static constexpr std::size_t kMaxWordBytes = 256;
  static constexpr std::size_t kMaxWords = 1 << 16;
  static constexpr std::size_t kMaxIds = 1 << 20;

  // Appends the cached ids of `word` to `out`; false when it is not cached.
  bool append(std::string_view word, std::uint64_t hash, std::vector<std::int32_t>& out) const {
    const std::uint64_t* value = words_.find(word, hash);
    if (!value) return false;
    const auto offset = static_cast<std::size_t>(*value >> 32);
    const auto count = static_cast<std::size_t>(*value & 0xFFFFFFFF);
    out.insert(out.end(), ids_.begin() + static_cast<std::ptrdiff_t>(offset),
               ids_.begin() + static_cast<std::ptrdiff_t>(offset + count));
    return true;
  }

  void insert(std::string_view word, std::uint64_t hash, const std::int32_t* ids, std::size_t count) {
    if (word.size() > kMaxWordBytes) return;
    if (words_.size() >= kMaxWords || ids_.size() + count > kMaxIds) clear();
    words_.insert(word, hash, (std::uint64_t{ids_.size()} << 32) | count);
    ids_.insert(ids_.end(), ids, ids + count);
  }

  void clear() {
    words_.clear();
    ids_.clear();
  }

 private:
  StringMap words_;  // word -> (offset into ids_ << 32) | count
  std::vector<std::int32_t> ids_;
};

}  // namespace kael::text
