// What a loaded Tokenizer holds (private to src/text).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kael/text/tokenizer.hpp"
#include "text/bpe.hpp"
#include "text/flat_maps.hpp"

namespace kael::text {

struct Tokenizer::Impl {
  // Tells thread-local word caches which tokenizer filled them (never reused, unlike addresses).
  std::uint64_t instance_id = 0;
  // Token bytes by id; present[id] is false for ids vocab.json skips.
  std::vector<std::string> tokens;
  std::vector<bool> present;
  // Bytes -> id of every mergeable token (single bytes and merge results), for the whole-piece
  // lookup that skips BPE for most words.
  StringMap mergeable;
  BpeTables bpe;
  // The id of "<|endoftext|>" when the vocabulary has it.
  std::optional<std::int32_t> end_of_text;
};

// Builds the tables from the parsed files (tokenizer_load.cpp). `vocab_source` and
// `merges_source` name the files in messages.
std::unique_ptr<Tokenizer::Impl> build_tokenizer(const std::string& vocab_json, const std::string& vocab_source,
                                                 const std::string& merges_txt, const std::string& merges_source);

}  // namespace kael::text
