// Internal to src/train: cutting text into pieces that tokenize independently (encode_parallel).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kael/text/tokenizer.hpp"

namespace kael::train {

// Pieces of about this many bytes keep every thread busy without costing much per piece.
inline constexpr std::size_t kPieceBytes = 1 << 18;

// `text` cut into pieces of at least target_bytes (the last may be shorter) at safe points (see
// encode_parallel); one piece when there is no safe point.
std::vector<std::string_view> cut_text(std::string_view text, std::size_t target_bytes);

// tokenizer.encode of each piece, on all of kael's threads.
std::vector<std::vector<std::int32_t>> encode_pieces(const text::Tokenizer& tokenizer,
                                                     std::span<const std::string_view> pieces);

}  // namespace kael::train
