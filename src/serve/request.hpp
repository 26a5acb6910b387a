// Parsing and validating request bodies: every field's type and range is checked here, so a
// request that reaches the scheduler cannot make the model throw. Unknown fields are ignored
// (OpenAI clients send extras such as "user"); known but unsupported values are a 400.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kael/generate/beam_search.hpp"
#include "kael/generate/sequence.hpp"
#include "kael/text/tokenizer.hpp"

namespace kael::serve {

// What the server accepts, fixed at start-up from the model and the command line.
struct RequestLimits {
  int n_positions = 1024;        // prompt + max_tokens must fit
  std::int64_t vocab_size = 50257;  // token ids in prompts must be below this
  int max_stop = 4;              // stop strings per request (OpenAI's limit)
  std::size_t max_stop_bytes = 256;
  int max_logprobs = 20;         // alternatives per token
  int max_choices = 8;           // n and best_of: each candidate takes a batch slot
  int default_max_tokens = 16;   // OpenAI's default for completions
  // Text tokenized per request (a prompt string, /tokenize's text): BPE on one long word costs
  // about 20 bytes of memory per byte and O(n log n) time, so this bounds both (413 past it).
  std::size_t max_text_bytes = 1 << 20;
};

struct CompletionRequest {
  std::string model;                    // as sent ("" when absent); echoed back
  std::vector<std::int32_t> prompt_ids;
  std::string prompt_text;              // the prompt's bytes, for echo
  generate::GenerateOptions options;
  bool stream = false;
  bool echo = false;
  bool include_usage = true;            // usage in the last streamed chunk
  int n = 1;                            // choices returned
  int best_of = 1;                      // candidates generated (>= n); the n of highest mean log-probability win
  bool return_logprobs = false;         // the response has "logprobs" (options.logprobs may be on for ranking only)
  // "use_beam_search": true (vLLM's extension): beam search with best_of beams, n returned.
  bool use_beam_search = false;
  generate::BeamSearchOptions beams;
};

// Parses a /v1/completions body. HttpError 400 naming the field for malformed JSON, a wrong
// type, a value out of range, or prompt + max_tokens past the context (with the counts).
// `next_seed` supplies the seed when the request has none.
CompletionRequest parse_completion_request(std::string_view body, const text::Tokenizer& tokenizer,
                                           const RequestLimits& limits, std::uint64_t next_seed);

// {"text": "...", "allow_special": false} -> the text and the flag.
struct TokenizeRequest {
  std::string text;
  bool allow_special = false;
};
// HttpError 413 when the text is longer than limits.max_text_bytes.
TokenizeRequest parse_tokenize_request(std::string_view body, const RequestLimits& limits);

// {"ids": [1, 2, 3]} (or "tokens") -> the ids, each checked against the vocabulary.
std::vector<std::int32_t> parse_detokenize_request(std::string_view body, std::int64_t vocab_size);

}  // namespace kael::serve
