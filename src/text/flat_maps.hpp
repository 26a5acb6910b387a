// Open-addressing hash maps for the tokenizer's hot path: byte strings -> 64-bit values (the
// vocabulary and the word cache) and token pairs -> merge (the BPE ranks). Linear probing over
// a power-of-two table kept at most half full; no per-lookup allocation and no std::string keys.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace kael::text {

// A fast hash of short byte strings: 8 bytes per multiply, then a final avalanche.
inline std::uint64_t hash_bytes(std::string_view bytes) {
  constexpr std::uint64_t kMul = 0x9E3779B97F4A7C15ull;
  const char* p = bytes.data();
  std::size_t n = bytes.size();
  std::uint64_t h = n * kMul;
  while (n >= 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    h = (h ^ v) * kMul;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    std::uint64_t v = 0;
    std::memcpy(&v, p, n);
    h = (h ^ v) * kMul;
  }
  h ^= h >> 32;
  h *= 0xD6E8FEB86659FD93ull;
  h ^= h >> 32;
  return h;
}

// a[0, n) == b[0, n), with fixed-size loads instead of a call to memcmp (keys are mostly short).
inline bool bytes_equal(const char* a, const char* b, std::size_t n) {
  auto load8 = [](const char* p) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  };
  auto load4 = [](const char* p) {
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  };
  if (n >= 8) {
    for (std::size_t i = 0; i + 8 < n; i += 8)
      if (load8(a + i) != load8(b + i)) return false;
    return load8(a + n - 8) == load8(b + n - 8);  // the last 8 bytes, maybe overlapping
  }
  if (n >= 4) return load4(a) == load4(b) && load4(a + n - 4) == load4(b + n - 4);
  for (std::size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

// Byte string -> uint64. Keys are copied into one arena.
class StringMap {
 public:
  StringMap() { rehash(16); }

  // The value of `key` (whose hash is `hash`), or nullptr.
  const std::uint64_t* find(std::string_view key, std::uint64_t hash) const {
    for (std::size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.length == kEmpty) return nullptr;
      if (slot.hash == hash && slot.length == key.size() &&
          bytes_equal(arena_.data() + slot.offset, key.data(), key.size()))
        return &slot.value;
    }
  }
  const std::uint64_t* find(std::string_view key) const { return find(key, hash_bytes(key)); }

  // Inserts or overwrites. Keys must be shorter than 4 GiB, as must the arena.
  void insert(std::string_view key, std::uint64_t hash, std::uint64_t value) {
    if ((count_ + 1) * 2 > slots_.size()) rehash(slots_.size() * 2);
    for (std::size_t i = hash & mask_;; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.length == kEmpty) {
        slot = {hash, static_cast<std::uint32_t>(arena_.size()), static_cast<std::uint32_t>(key.size()), value};
        arena_.append(key);
        ++count_;
        return;
      }
      if (slot.hash == hash && slot.length == key.size() &&
          bytes_equal(arena_.data() + slot.offset, key.data(), key.size())) {
        slot.value = value;
        return;
      }
    }
  }
  void insert(std::string_view key, std::uint64_t value) { insert(key, hash_bytes(key), value); }

  std::size_t size() const { return count_; }
  std::size_t arena_bytes() const { return arena_.size(); }
  void clear() {
    arena_.clear();
    count_ = 0;
    slots_.assign(16, Slot{});
    mask_ = 15;
  }

 private:
  static constexpr std::uint32_t kEmpty = 0xFFFFFFFF;
  struct Slot {
    std::uint64_t hash = 0;
    std::uint32_t offset = 0;
    std::uint32_t length = kEmpty;
    std::uint64_t value = 0;
  };

  void rehash(std::size_t capacity) {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    for (const Slot& slot : old) {
      if (slot.length == kEmpty) continue;
      std::size_t i = slot.hash & mask_;
      while (slots_[i].length != kEmpty) i = (i + 1) & mask_;
      slots_[i] = slot;
    }
  }

  std::vector<Slot> slots_;
  std::string arena_;
  std::size_t count_ = 0;
  std::size_t mask_ = 0;
};

// What merging a pair gives: its rank (lower merges first) and the merged token's id.
struct Merge {
  std::uint32_t rank;
  std::uint32_t id;
};

// (left id, right id) -> Merge. Ids are below 2^31.
class PairMap {
 public:
  static constexpr std::uint32_t kNoRank = 0xFFFFFFFF;

  PairMap() { rehash(16); }

  // The merge of (left, right), or {kNoRank, 0} when the pair does not merge.
  Merge find(std::uint32_t left, std::uint32_t right) const {
    const std::uint64_t key = pack(left, right);
    for (std::size_t i = slot_of(key);; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.key == key) return slot.merge;
      if (slot.key == kEmptyKey) return {kNoRank, 0};
    }
  }

  // Keeps the lower rank when the pair is already there.
  void insert(std::uint32_t left, std::uint32_t right, Merge merge) {
    if ((count_ + 1) * 2 > slots_.size()) rehash(slots_.size() * 2);
    const std::uint64_t key = pack(left, right);
    for (std::size_t i = slot_of(key);; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.key == kEmptyKey) {
        slot = {key, merge};
        ++count_;
        return;
      }
      if (slot.key == key) {
        if (merge.rank < slot.merge.rank) slot.merge = merge;
        return;
      }
    }
  }

  std::size_t size() const { return count_; }

 private:
  static constexpr std::uint64_t kEmptyKey = ~std::uint64_t{0};  // ids < 2^31 never pack to it
  struct Slot {
    std::uint64_t key = kEmptyKey;
    Merge merge{kNoRank, 0};
  };

  static std::uint64_t pack(std::uint32_t left, std::uint32_t right) {
    return (std::uint64_t{left} << 32) | right;
  }
  // A full 64-bit mix: ids are small and correlated, and a plain multiply leaves them in
  // clusters that make linear probing slow.
  std::size_t slot_of(std::uint64_t key) const {
    key ^= key >> 33;
    key *= 0xFF51AFD7ED558CCDull;
    key ^= key >> 33;
    key *= 0xC4CEB9FE1A85EC53ull;
    key ^= key >> 33;
    return static_cast<std::size_t>(key) & mask_;
  }
  void rehash(std::size_t capacity) {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    count_ = 0;
    for (const Slot& slot : old)
      if (slot.key != kEmptyKey) insert(static_cast<std::uint32_t>(slot.key >> 32), static_cast<std::uint32_t>(slot.key), slot.merge);
  }

  std::vector<Slot> slots_;
  std::size_t count_ = 0;
  std::size_t mask_ = 0;
};

}  // namespace kael::text
