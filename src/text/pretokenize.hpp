// The GPT-2 pre-splitter, written by hand (std::regex cannot express the pattern):
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// The first alternative that matches at a position wins and each is greedy, so a piece is one
// of: a lowercase ASCII contraction; an optional ASCII space and a run of one class (letters,
// numbers, or "other": neither letter, number nor white space); or white space, where a run
// followed by more text leaves its last character to the next piece. Invalid UTF-8 bytes are
// "other" characters of one byte each, so any byte string splits and the pieces concatenate
// back to it.
#pragma once

#include <cstddef>
#include <string_view>
#include "kael/text/split.hpp"  // split_gpt2_words, all pieces at once (encode streams them instead)
#include "text/unicode.hpp"

namespace kael::text {

// The end of the piece that starts at `pos` (< size): the position where the next one starts.
std::size_t gpt2_piece_end(const unicode::ClassTable& table, const unsigned char* data, std::size_t size,
                           std::size_t pos);

// Calls on_piece(std::string_view) for each piece of `text`, in order.
template <class OnPiece>
void split_gpt2(std::string_view text, OnPiece&& on_piece) {
  const unicode::ClassTable& table = unicode::ClassTable::get();
  const auto* data = reinterpret_cast<const unsigned char*>(text.data());
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t end = gpt2_piece_end(table, data, text.size(), pos);
    on_piece(text.substr(pos, end - pos));
    pos = end;
  }
}

}  // namespace kael::text
