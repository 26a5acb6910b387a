// Reading GPT-2's two tokenizer files, with the checks of docs/behaviour.md, "Tokenizer". Both
// spell tokens in byte symbols (byte_symbols.hpp); these functions return raw bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kael::text {

// Ids above this are refused, so a hostile file cannot make us allocate a huge table.
inline constexpr std::uint32_t kMaxTokenId = (1u << 24) - 1;

// vocab.json: token bytes by id. Ids may have gaps (`present` says which are used).
struct VocabFile {
  std::vector<std::string> tokens;
  std::vector<bool> present;
};

// One line of merges.txt: two tokens, as bytes, and the 1-based line number for messages.
struct MergeLine {
  std::string left;
  std::string right;
  std::size_t line;
};

// A flat JSON object of symbol-spelled tokens to non-negative integer ids, each token and id
// used once; ValueError (naming `source`) otherwise.
VocabFile parse_vocab_json(const std::string& json, const std::string& source);
// One merge a line, two symbol-spelled tokens separated by one space; an optional first line
// "#version..."; CRLF line ends and a final newline are fine; ValueError otherwise.
std::vector<MergeLine> parse_merges_txt(const std::string& text, const std::string& source);

}  // namespace kael::text
