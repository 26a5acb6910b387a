// text::BpeTokenizer: the tokenizer under the book's name and signatures (int64 ids, as tensors
// of ids hold them). It is text::Tokenizer's encoder and decoder, not a second one: the ids are
// the same, widened to std::int64_t and checked on the way back.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kael/text/tokenizer.hpp"

namespace kael::text {

class BpeTokenizer {
 public:
  // Loads vocab.json and merges.txt: Error when a file is missing, ValueError when malformed.
  BpeTokenizer(const std::filesystem::path& vocab_path, const std::filesystem::path& merges_path);

  // Ids of `text` (any bytes), equal to tiktoken's gpt2 encode_ordinary: "<|endoftext|>" is
  // ordinary text here. An empty text gives no ids.
  std::vector<std::int64_t> encode(std::string_view text) const;
  // The tokens' bytes joined (may end inside a UTF-8 character); IndexError on an unknown id.
  std::string decode(std::span<const std::int64_t> ids) const;
  std::size_t vocabulary_size() const { return tokenizer_->vocabulary_size(); }

  // The 256 byte symbols, UTF-8 encoded: byte_symbols()[b] spells byte b in vocab.json and
  // merges.txt ("Ġ" for the space, "Ċ" for a newline).
  static const std::array<std::string, 256>& byte_symbols();

  // The engine's tokenizer behind this one (int32 ids, special tokens, stream decoding).
  const Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;  // shared: copies of a BpeTokenizer are cheap
};

}  // namespace kael::text
