// Encoding and decoding with the loaded tables.
#include "kael/text/tokenizer.hpp"

#include "kael/core/error.hpp"
#include "text/pretokenize.hpp"
#include "text/tokenizer_impl.hpp"
#include "text/word_cache.hpp"

namespace kael::text {
namespace {

constexpr std::string_view kEndOfTextText = "<|endoftext|>";

// This thread's word cache, emptied when it last served another tokenizer.
WordCache& thread_cache(std::uint64_t instance_id) {
  struct Owned {
    std::uint64_t owner = 0;
    WordCache cache;
  };
  thread_local Owned owned;
  if (owned.owner != instance_id) {
    owned.cache.clear();
    owned.owner = instance_id;
  }
  return owned.cache;
}

// tiktoken's encode_ordinary: split, then per piece a single byte, a whole-piece vocabulary
// hit (as tiktoken does; most English words are one token), a cached word, or BPE (whose
// result is cached). One hash of the piece serves both lookups. The cache is per thread
// rather than shared, so the hot path takes no lock.
void encode_ordinary(const Tokenizer::Impl& impl, std::string_view text, std::vector<std::int32_t>& out) {
  WordCache& cache = thread_cache(impl.instance_id);
  split_gpt2(text, [&](std::string_view piece) {
    if (piece.size() == 1) {
      out.push_back(static_cast<std::int32_t>(impl.bpe.byte_ids[static_cast<unsigned char>(piece[0])]));
      return;
    }
    const std::uint64_t hash = hash_bytes(piece);
    if (const std::uint64_t* id = impl.mergeable.find(piece, hash)) {
      out.push_back(static_cast<std::int32_t>(*id));
      return;
    }
    if (cache.append(piece, hash, out)) return;
    const std::size_t first = out.size();
    bpe_merge(impl.bpe, piece, out);
    cache.insert(piece, hash, out.data() + first, out.size() - first);
  });
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 4 + 16);
  if (!allow_special) {
    encode_ordinary(*impl_, text, ids);
    return ids;
  }
  if (!impl_->end_of_text) throw ValueError("the vocabulary has no <|endoftext|> token");
  // As tiktoken does with allowed special tokens: cut the text at each occurrence and encode
  // the pieces between on their own.
  for (std::size_t pos = 0;;) {
    const std::size_t found = text.find(kEndOfTextText, pos);
    encode_ordinary(*impl_, text.substr(pos, found == std::string_view::npos ? std::string_view::npos : found - pos), ids);
    if (found == std::string_view::npos) break;
    ids.push_back(*impl_->end_of_text);
    pos = found + kEndOfTextText.size();
  }
  return ids;
}

std::string_view Tokenizer::token_bytes(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= impl_->tokens.size() || !impl_->present[static_cast<std::size_t>(id)])
    throw IndexError(str("token id ", id, " is not in the vocabulary (ids 0 to ", impl_->tokens.size() - 1, ")"));
  return impl_->tokens[static_cast<std::size_t>(id)];
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids) const {
  std::size_t total = 0;
  for (const std::int32_t id : ids) total += token_bytes(id).size();
  std::string bytes;
  bytes.reserve(total);
  for (const std::int32_t id : ids) bytes += token_bytes(id);
  return bytes;
}

std::size_t Tokenizer::vocabulary_size() const { return impl_->tokens.size(); }

}  // namespace kael::text
