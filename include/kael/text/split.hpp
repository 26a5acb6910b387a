// GPT-2's pre-split: the words that byte-pair encoding then merges one at a time (the pattern
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ of OpenAI's encoder).
// Any byte string splits (an invalid UTF-8 byte is a word character of "other" class), and the
// words concatenate back to the text.
#pragma once

#include <string_view>
#include <vector>

namespace kael::text {

// The words of `text`, in order, as views into it: "Hello, my name" gives "Hello" "," " my" " name".
std::vector<std::string_view> split_gpt2_words(std::string_view text);

}  // namespace kael::text
