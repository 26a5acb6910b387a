#include "text/bpe.hpp"

#include <algorithm>
#include <functional>

#include "kael/core/error.hpp"

namespace kael::text {

void BpeTables::index_byte_pairs() {
  byte_pairs.resize(256 * 256);
  for (unsigned a = 0; a < 256; ++a)
    for (unsigned b = 0; b < 256; ++b) byte_pairs[a << 8 | b] = pairs.find(byte_ids[a], byte_ids[b]);
}

void bpe_merge(const BpeTables& tables, std::string_view piece, std::vector<std::int32_t>& out) {
  if (piece.size() <= kScanLimit) {
    bpe_merge_scan(tables, piece, out);
  } else {
    bpe_merge_heap(tables, piece, out);
  }
}

void bpe_merge_scan(const BpeTables& tables, std::string_view piece, std::vector<std::int32_t>& out) {
  constexpr std::uint32_t kNone = PairMap::kNoRank;
  const std::size_t n = piece.size();
  if (n > kScanLimit) return bpe_merge_heap(tables, piece, out);
  // parts[i] is a token id; merges[i] is what merging parts[i] and parts[i + 1] gives.
  std::uint32_t parts[kScanLimit];
  Merge merges[kScanLimit];
  const auto* bytes = reinterpret_cast<const unsigned char*>(piece.data());
  for (std::size_t i = 0; i < n; ++i) parts[i] = tables.byte_ids[bytes[i]];
  for (std::size_t i = 0; i + 1 < n; ++i) merges[i] = tables.byte_pairs[bytes[i] << 8 | bytes[i + 1]];

  std::size_t count = n;
  while (count > 1) {
    std::size_t best = 0;
    std::uint32_t best_rank = kNone;
    for (std::size_t i = 0; i + 1 < count; ++i) {
      if (merges[i].rank < best_rank) {  // strict: the leftmost of equal ranks wins
        best_rank = merges[i].rank;
        best = i;
      }
    }
    if (best_rank == kNone) break;
    parts[best] = merges[best].id;
    for (std::size_t i = best + 1; i + 1 < count; ++i) {
      parts[i] = parts[i + 1];
      merges[i] = merges[i + 1];
    }
    --count;
    if (best + 1 < count) merges[best] = tables.pairs.find(parts[best], parts[best + 1]);
    if (best > 0) merges[best - 1] = tables.pairs.find(parts[best - 1], parts[best]);
  }
  for (std::size_t i = 0; i < count; ++i) out.push_back(static_cast<std::int32_t>(parts[i]));
}

void bpe_merge_heap(const BpeTables& tables, std::string_view piece, std::vector<std::int32_t>& out) {
  constexpr std::uint32_t kEnd = 0xFFFFFFFF;
  if (piece.size() >= kEnd) throw ValueError(str("cannot encode a single word of ", piece.size(), " bytes (4 GiB or more)"));
  const auto n = static_cast<std::uint32_t>(piece.size());
  if (n == 0) return;
  // A linked list of parts, indexed by the position of each part's first byte.
  struct Part {
    std::uint32_t id;
    std::uint32_t prev;
    std::uint32_t next;
  };
  std::vector<Part> parts(n);
  for (std::uint32_t i = 0; i < n; ++i)
    parts[i] = {tables.byte_ids[static_cast<unsigned char>(piece[i])], i == 0 ? kEnd : i - 1, i + 1 == n ? kEnd : i + 1};

  // A candidate merge of the part at `left` with the one after it, as one key: rank in the
  // high half, position in the low half, so the smallest key is the lowest rank, leftmost.
  // Eight bytes, not the pair's ids: at a pop the pair is looked up again, and the candidate
  // holds when the parts there now make a token of the same rank. That is exact: a rank names
  // one token, so the same rank at the same position is the same merge, however the two parts
  // came to be. A min-heap of keys (std::greater on a vector, built in one pass).
  const auto key = [](std::uint32_t rank, std::uint32_t left) { return std::uint64_t{rank} << 32 | left; };
  std::vector<std::uint64_t> heap;
  heap.reserve(n);
  const auto* bytes = reinterpret_cast<const unsigned char*>(piece.data());
  for (std::uint32_t i = 0; i + 1 < n; ++i) {
    const Merge merge = tables.byte_pairs[bytes[i] << 8 | bytes[i + 1]];
    if (merge.rank != PairMap::kNoRank) heap.push_back(key(merge.rank, i));
  }
  const std::greater<std::uint64_t> later;
  std::make_heap(heap.begin(), heap.end(), later);
  const auto consider = [&](std::uint32_t left) {
    const std::uint32_t right = parts[left].next;
    if (right == kEnd) return;
    const Merge merge = tables.pairs.find(parts[left].id, parts[right].id);
    if (merge.rank == PairMap::kNoRank) return;
    heap.push_back(key(merge.rank, left));
    std::push_heap(heap.begin(), heap.end(), later);
  };

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const std::uint64_t top = heap.back();
    heap.pop_back();
    const auto rank = static_cast<std::uint32_t>(top >> 32);
    const auto left = static_cast<std::uint32_t>(top & 0xFFFFFFFF);
    // Stale when the part at `left` was merged into its left neighbour, is last, or now
    // pairs into another token (or none).
    if (parts[left].id == kEnd || parts[left].next == kEnd) continue;
    const std::uint32_t right = parts[left].next;
    const Merge merge = tables.pairs.find(parts[left].id, parts[right].id);
    if (merge.rank != rank) continue;
    parts[left].id = merge.id;
    const std::uint32_t after = parts[right].next;
    parts[left].next = after;
    if (after != kEnd) parts[after].prev = left;
    parts[right].id = kEnd;  // unlinked
    if (parts[left].prev != kEnd) consider(parts[left].prev);
    consider(left);
  }
  for (std::uint32_t i = 0; i != kEnd; i = parts[i].next) out.push_back(static_cast<std::int32_t>(parts[i].id));
}

std::vector<std::string> bpe_reference(std::string_view piece,
                                       const std::function<std::optional<std::uint32_t>(std::string_view)>& rank_of) {
  std::vector<std::string> parts;
  for (char c : piece) parts.emplace_back(1, c);
  while (parts.size() > 1) {
    std::optional<std::uint32_t> best_rank;
    std::size_t best = 0;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
      const auto rank = rank_of(parts[i] + parts[i + 1]);
      if (rank && (!best_rank || *rank < *best_rank)) {
        best_rank = rank;
        best = i;
      }
    }
    if (!best_rank) break;
    parts[best] += parts[best + 1];
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  return parts;
}

}  // namespace kael::text
