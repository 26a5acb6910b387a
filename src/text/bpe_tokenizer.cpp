// text::BpeTokenizer over text::Tokenizer: the id width is all that differs.
#include "kael/text/bpe.hpp"

#include <limits>

#include "kael/core/error.hpp"
#include "text/byte_symbols.hpp"

namespace kael::text {

BpeTokenizer::BpeTokenizer(const std::filesystem::path& vocab_path, const std::filesystem::path& merges_path)
    : tokenizer_(std::make_shared<const Tokenizer>(Tokenizer::from_files(vocab_path, merges_path))) {}

std::vector<std::int64_t> BpeTokenizer::encode(std::string_view text) const {
  const std::vector<std::int32_t> ids = tokenizer_->encode(text);
  return {ids.begin(), ids.end()};
}

std::string BpeTokenizer::decode(std::span<const std::int64_t> ids) const {
  std::vector<std::int32_t> narrow;
  narrow.reserve(ids.size());
  for (const std::int64_t id : ids) {
    // Past int32 no id can be in the vocabulary; the narrowing must not wrap into one that is.
    if (id < 0 || id > std::numeric_limits<std::int32_t>::max())
      throw IndexError(str("token id ", id, " is not in the vocabulary (ids 0 to ", vocabulary_size() - 1, ")"));
    narrow.push_back(static_cast<std::int32_t>(id));
  }
  return tokenizer_->decode(narrow);
}

const std::array<std::string, 256>& BpeTokenizer::byte_symbols() {
  static const std::array<std::string, 256> symbols = [] {
    std::array<std::string, 256> out;
    for (unsigned byte = 0; byte < 256; ++byte)
      out[byte] = bytes_to_symbols(std::string(1, static_cast<char>(byte)));
    return out;
  }();
  return symbols;
}

}  // namespace kael::text
