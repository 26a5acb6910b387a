// Training data: text files, directories of them, or JSONL records, tokenized into one stream of
// token ids (each document followed by <|endoftext|>), cached, split into a training and a
// held-out part, and cut into windows of T + 1 tokens that micro-batches draw from.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "kael/text/tokenizer.hpp"

namespace kael::train {

// Extensions a directory given as --data contributes (searched recursively, in sorted path
// order); a file named directly is read whatever its extension. ".jsonl" files hold one JSON
// object a line with a "text" string, each record a document; the others are one document each.
inline constexpr const char* kTextExtensions[] = {".txt", ".text", ".md", ".jsonl"};

// The documents' files, in order: each input that is a file, then each directory's files with a
// kTextExtensions extension (recursively, sorted by path). Error for an input that does not exist
// or a directory with no such file; ValueError for an empty file.
std::vector<std::filesystem::path> list_data_files(std::span<const std::filesystem::path> inputs);

// The documents of one file: its bytes, or the "text" of each JSONL record (ValueError naming the
// file and line for a line that is not a JSON object with a string "text"; blank lines are skipped).
std::vector<std::string> read_documents(const std::filesystem::path& file);

// Ids of `text`, equal to tokenizer.encode(text), computed in pieces on all of kael's threads.
// The text is cut only after a "\n" that sits between two printable ASCII characters: there the
// GPT-2 pre-splitter always ends one piece and starts the next, so the pieces' ids concatenate to
// the whole text's.
std::vector<std::int32_t> encode_parallel(const text::Tokenizer& tokenizer, std::string_view text);

struct TokenStream {
  std::vector<std::int32_t> tokens;  // every document's ids, each followed by kEndOfText
  std::int64_t documents = 0;
  bool from_cache = false;  // true when read from the cache instead of tokenized
};

// Tokenizes the documents of `files` (list_data_files) in order, each followed by kEndOfText.
// With a non-empty cache_dir, the stream is cached there in a file whose key covers the files'
// paths, sizes and modification times and the tokenizer files' contents: a later call with the
// same key reads it instead of tokenizing. A cache file that is damaged is ignored and rewritten.
// ValueError when the documents hold no text at all.
TokenStream tokenize_files(std::span<const std::filesystem::path> files, const text::Tokenizer& tokenizer,
                           std::span<const std::filesystem::path> tokenizer_files,
                           const std::filesystem::path& cache_dir);

// The held-out part is the last floor(size * val_fraction) tokens of the stream; the training
// part is the rest. ValueError unless 0 <= val_fraction < 1.
struct TrainValSplit {
  std::span<const std::int32_t> train;
  std::span<const std::int32_t> val;
};
TrainValSplit split_train_val(std::span<const std::int32_t> tokens, double val_fraction);

// Windows of T + 1 tokens starting every T tokens: window w is tokens[w*T, w*T + T], its inputs
// the first T and its targets the last T. A stream of N tokens has floor((N - 1) / T) windows.
std::int64_t window_count(std::int64_t tokens, int T);

enum class Order { sequential, shuffled };
// "sequential" / "shuffled"; ValueError naming the choices otherwise.
Order parse_order(std::string_view name);
const char* order_name(Order order);

// Which windows each micro-batch reads. Position p = (s*K + k)*B + b is row b of micro-batch k of
// optimizer step s. Sequential: window p mod W. Shuffled: epoch e = p / W takes the windows in
// the order of a permutation of [0, W) drawn from (seed, e) by Fisher-Yates with splitmix64, and
// row p reads window perm_e[p mod W]. Everything follows from the step, so resuming at step s
// needs no other data position.
class WindowSampler {
 public:
  // ValueError when `tokens` holds less than one window (T + 1 tokens).
  WindowSampler(std::span<const std::int32_t> tokens, int T, int B, int K, Order order, std::uint64_t seed);

  std::int64_t windows() const { return windows_; }
  // Epoch of micro-batch k of step s (of its first row).
  std::int64_t epoch(std::int64_t step, int k) const;
  // The window that row b of micro-batch k of step s reads.
  std::int64_t window(std::int64_t step, int k, int b);
  // Fills inputs and targets, each (rows, T) row-major, with rows first_row ... of micro-batch k
  // of step s (all B rows by default; a data-parallel rank takes its share). ValueError unless
  // the buffers hold whole rows within [0, B).
  void fill(std::span<std::int32_t> inputs, std::span<std::int32_t> targets, std::int64_t step, int k,
            int first_row = 0);

 private:
  std::span<const std::int32_t> tokens_;
  int T_, B_, K_;
  Order order_;
  std::uint64_t seed_;
  std::int64_t windows_;
  std::int64_t permutation_epoch_ = -1;  // the epoch permutation_ holds
  std::vector<std::int64_t> permutation_;
};

// The permutation of [0, n) that WindowSampler uses for `epoch` (exposed for tests).
std::vector<std::int64_t> epoch_permutation(std::int64_t n, std::uint64_t seed, std::int64_t epoch);

}  // namespace kael::train
