// Loading: vocab.json and merges.txt -> the tables encode and decode use.
#include <atomic>

#include "kael/core/error.hpp"
#include "text/byte_symbols.hpp"
#include "text/tokenizer_impl.hpp"
#include "text/unicode.hpp"
#include "kael/core/file.hpp"
#include "text/vocab_files.hpp"

namespace kael::text {
namespace {

// A token as vocab.json spells it, quoted.
// A token as merges.txt spells it, quoted; at most 60 bytes of it, so a hostile file cannot
// make a message as large as itself.
std::string spelled(std::string_view bytes) {
  constexpr std::size_t kMax = 60;
  std::string out(1, '\'');
  out.append(bytes_to_symbols(bytes.substr(0, kMax)));
  out.push_back('\'');
  if (bytes.size() > kMax) out += str("... (", bytes.size(), " bytes)");
  return out;
}

std::uint64_t next_instance_id() {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;
}

}  // namespace

std::unique_ptr<Tokenizer::Impl> build_tokenizer(const std::string& vocab_json, const std::string& vocab_source,
                                                 const std::string& merges_txt, const std::string& merges_source) {
  VocabFile vocab = parse_vocab_json(vocab_json, vocab_source);
  const std::vector<MergeLine> merges = parse_merges_txt(merges_txt, merges_source);

  auto impl = std::make_unique<Tokenizer::Impl>();
  impl->instance_id = next_instance_id();
  StringMap all;  // bytes -> id of every token
  for (std::size_t id = 0; id < vocab.tokens.size(); ++id)
    if (vocab.present[id]) all.insert(vocab.tokens[id], id);

  // Mergeable tokens and their ranks: single bytes first (rank 0, never compared), then each
  // token at the first merges.txt line that makes it.
  constexpr std::uint32_t kUnranked = PairMap::kNoRank;
  std::vector<std::uint32_t> rank(vocab.tokens.size(), kUnranked);
  for (unsigned b = 0; b < 256; ++b) {
    const std::string byte(1, static_cast<char>(b));
    const std::uint64_t* id = all.find(byte);
    if (!id) throw ValueError(str(vocab_source, ": no token for the byte 0x", std::hex, b, " (", spelled(byte), ")"));
    impl->bpe.byte_ids[b] = static_cast<std::uint32_t>(*id);
    rank[*id] = 0;
  }
  std::vector<std::uint32_t> made;  // ids of merge results, in rank order
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const MergeLine& line = merges[i];
    for (const std::string* part : {&line.left, &line.right})
      if (!all.find(*part))
        throw ValueError(str(merges_source, " line ", line.line, ": token ", spelled(*part), " is not in ", vocab_source));
    const std::uint64_t* id = all.find(line.left + line.right);
    if (!id)
      throw ValueError(str(merges_source, " line ", line.line, ": the merged token ", spelled(line.left + line.right),
                           " is not in ", vocab_source));
    if (rank[*id] == kUnranked) {
      rank[*id] = static_cast<std::uint32_t>(i);
      made.push_back(static_cast<std::uint32_t>(*id));
    }
  }

  // Every split of a merge result into two mergeable tokens merges to it at its rank.
  for (const std::uint32_t id : made) {
    const std::string& bytes = vocab.tokens[id];
    for (std::size_t k = 1; k < bytes.size(); ++k) {
      const std::uint64_t* left = all.find(std::string_view(bytes).substr(0, k));
      const std::uint64_t* right = all.find(std::string_view(bytes).substr(k));
      if (left && right && rank[*left] != kUnranked && rank[*right] != kUnranked)
        impl->bpe.pairs.insert(static_cast<std::uint32_t>(*left), static_cast<std::uint32_t>(*right), {rank[id], id});
    }
  }

  impl->bpe.index_byte_pairs();
  unicode::ClassTable::get();  // built now, so the first encode is not the slow one

  for (std::size_t id = 0; id < vocab.tokens.size(); ++id)
    if (rank[id] != kUnranked) impl->mergeable.insert(vocab.tokens[id], id);
  if (const std::uint64_t* id = all.find("<|endoftext|>")) impl->end_of_text = static_cast<std::int32_t>(*id);
  impl->tokens = std::move(vocab.tokens);
  impl->present = std::move(vocab.present);
  return impl;
}

Tokenizer Tokenizer::from_files(const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt) {
  const std::string vocab = read_regular_file(vocab_json, "vocab file", kMaxTokenizerFileBytes);
  const std::string merges = read_regular_file(merges_txt, "merges file", kMaxTokenizerFileBytes);
  return Tokenizer(build_tokenizer(vocab, vocab_json.string(), merges, merges_txt.string()));
}

Tokenizer Tokenizer::from_strings(const std::string& vocab_json, const std::string& merges_txt) {
  return Tokenizer(build_tokenizer(vocab_json, "vocab.json", merges_txt, "merges.txt"));
}

Tokenizer Tokenizer::from_directory(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw Error(str("tokenizer directory not found: ", dir.string()));
  return from_files(dir / "vocab.json", dir / "merges.txt");
}

}  // namespace kael::text
