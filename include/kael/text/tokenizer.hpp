// GPT-2's byte-level BPE tokenizer, equal to tiktoken's "gpt2" encoding (docs/behaviour.md,
// "Tokenizer"). A loaded Tokenizer is immutable: encode and decode may run on many threads at once
// (each thread keeps its own cache of recently merged words).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kael::text {

inline constexpr std::int32_t kEndOfText = 50256;
// Largest vocab.json or merges.txt read (Error past it): GPT-2's are about 1 MiB and 0.5 MiB,
// and the largest public BPE vocabularies (250k tokens) are under 20 MiB.
inline constexpr std::uint64_t kMaxTokenizerFileBytes = 64 << 20;

class Tokenizer {
 public:
  // Loads vocab.json and merges.txt; Error when a file is missing, ValueError when malformed.
  static Tokenizer from_files(const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt);
  // Loads DIR/vocab.json and DIR/merges.txt.
  static Tokenizer from_directory(const std::filesystem::path& dir);
  // Builds from the two files' contents, already in memory; ValueError when malformed.
  static Tokenizer from_strings(const std::string& vocab_json, const std::string& merges_txt);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Ids of `text` (any bytes; invalid UTF-8 never fails). With allow_special, the text
  // "<|endoftext|>" becomes id 50256; otherwise it is ordinary text.
  std::vector<std::int32_t> encode(std::string_view text, bool allow_special = false) const;
  // Concatenated bytes of the tokens (not necessarily valid UTF-8); IndexError on an unknown id.
  std::string decode(std::span<const std::int32_t> ids) const;
  // The bytes of one token; IndexError on an unknown id.
  std::string_view token_bytes(std::int32_t id) const;
  // One more than the largest id.
  std::size_t vocabulary_size() const;

  // The loaded tables; opaque outside src/text.
  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Turns ids into text pieces as they arrive, holding back an incomplete UTF-8 tail so no
// piece ends in half a character. flush() returns whatever is left (possibly invalid UTF-8).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}
  std::string push(std::int32_t id);
  std::string flush();

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;
};

}  // namespace kael::text
