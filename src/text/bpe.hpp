// Byte-pair merging of one pre-split piece, tiktoken's way: start from the piece's bytes; while
// some adjacent pair of parts concatenates to a mergeable token, merge the pair of lowest rank
// (the leftmost of equal ranks); the parts left are the ids.
//
// A pair's rank is the rank of the token it makes (the first merges.txt line that makes those
// bytes). This differs from "the pair must be a merges.txt line" only when a token's bytes can
// be split into two tokens in a way that is not its line, e.g. "ab"+"c" for a token made by the
// line "a bc"; GPT-2 has 58,299 such pairs besides its 50,000 lines, and tiktoken merges them,
// so we do too. PairMap holds them all, keyed by the two ids.
//
// Designs tried, and why they lost or won:
// - Merging byte strings (std::string parts, concatenate and look up): one allocation per merge;
//   kept only as bpe_reference, the plain version the fast ones are tested against.
// - Parts as small integer ids, pair ranks from PairMap, tiktoken's scan for the minimum over a
//   rank array that shrinks by one each merge: O(n^2) but tiny constants and no allocation, so
//   it wins on ordinary words (bpe_merge_scan, used up to kScanLimit bytes).
// - The first round of pair lookups, on single bytes, from a dense 256 x 256 table instead of
//   the hash table: 5% fewer instructions encoding the corpus, and fewer cache misses.
// - A min-heap of (rank, position) over a linked list of parts, with stale entries skipped:
//   O(n log n), but used for every piece it costs 7% more instructions on the corpus than the
//   scan (allocations, heap traffic), so it only takes pieces above kScanLimit, where it keeps
//   a million-byte piece from taking quadratic time (bpe_merge_heap). Its entries are one
//   8-byte key each (the pair is looked up again when popped), built into a heap in one pass:
//   about 20 bytes of memory per byte of the piece, and half the time of 24-byte entries.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/flat_maps.hpp"

namespace kael::text {

struct BpeTables {
  PairMap pairs;                              // (left id, right id) -> rank and merged id
  std::array<std::uint32_t, 256> byte_ids{};  // the token of each single byte
  // pairs.find(byte_ids[a], byte_ids[b]) at [a << 8 | b]: every piece starts as bytes, so its
  // first round of lookups indexes this instead of probing the hash table.
  std::vector<Merge> byte_pairs;

  // Fills byte_pairs from pairs and byte_ids.
  void index_byte_pairs();
};

// Pieces up to this many bytes take the scan, longer ones the heap.
inline constexpr std::size_t kScanLimit = 128;

// Appends the ids of `piece` (not empty) to `out`.
void bpe_merge(const BpeTables& tables, std::string_view piece, std::vector<std::int32_t>& out);
// The two strategies, for tests (both give the same ids on any piece).
void bpe_merge_scan(const BpeTables& tables, std::string_view piece, std::vector<std::int32_t>& out);
void bpe_merge_heap(const BpeTables& tables, std::string_view piece, std::vector<std::int32_t>& out);

// The plain reference: byte-string parts, rank_of(bytes) gives a mergeable token's rank.
// Returns the parts as bytes.
std::vector<std::string> bpe_reference(std::string_view piece,
                                       const std::function<std::optional<std::uint32_t>(std::string_view)>& rank_of);

}  // namespace kael::text
