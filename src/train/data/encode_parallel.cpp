// Tokenizing long text on all threads: cut at points where the GPT-2 pre-splitter always starts a
// new piece, so the pieces' ids concatenate to the whole text's.
#include <atomic>
#include <vector>

#include "kael/train/data.hpp"
#include "kernels/infra/thread_pool.hpp"
#include "train/data/text_pieces.hpp"

namespace kael::train {

namespace {

bool printable_ascii(char c) { return c > ' ' && c < 0x7f; }

}  // namespace

std::vector<std::string_view> cut_text(std::string_view text, std::size_t target_bytes) {
  std::vector<std::string_view> pieces;
  std::size_t begin = 0;
  while (text.size() - begin > target_bytes) {
    // A cut at p needs text[p - 1] == '\n' between printable ASCII text[p - 2] and text[p]: the
    // newline is then a one-character whitespace run, a piece of its own in the whole text and
    // at the end of the left part alike, and no piece can start before p and go on past it.
    std::size_t p = begin + target_bytes;
    while (p < text.size() && !(text[p - 1] == '\n' && printable_ascii(text[p - 2]) && printable_ascii(text[p]))) ++p;
    if (p >= text.size()) break;
    pieces.push_back(text.substr(begin, p - begin));
    begin = p;
  }
  pieces.push_back(text.substr(begin));
  return pieces;
}

std::vector<std::vector<std::int32_t>> encode_pieces(const text::Tokenizer& tokenizer,
                                                     std::span<const std::string_view> pieces) {
  std::vector<std::vector<std::int32_t>> ids(pieces.size());
  std::atomic<std::size_t> next{0};
  // One range per thread; each thread takes the next piece until none is left, so uneven
  // pieces still keep every thread busy.
  const auto threads = static_cast<std::int64_t>(kernels::num_threads());
  kernels::parallel_for(threads, 1, [&](std::int64_t, std::int64_t) {
    for (std::size_t i; (i = next.fetch_add(1)) < pieces.size();) ids[i] = tokenizer.encode(pieces[i]);
  });
  return ids;
}

std::vector<std::int32_t> encode_parallel(const text::Tokenizer& tokenizer, std::string_view text) {
  const auto pieces = cut_text(text, kPieceBytes);
  std::vector<std::int32_t> out;
  for (auto& ids : encode_pieces(tokenizer, pieces)) out.insert(out.end(), ids.begin(), ids.end());
  return out;
}

}  // namespace kael::train
