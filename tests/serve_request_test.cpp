// The server's request parser (serve/request.hpp): a minimal /v1/completions body takes the
// documented defaults; each family of bad input (not JSON, a wrong type, a number out of range
// or past 64 bits, a malformed prompt, a prompt past the context or the text bound, too many
// choices or stop strings, beam search with sampling fields) is an HttpError naming the field;
// /tokenize and /detokenize bodies are bounded the same way. Uses the real GPT-2 tokenizer files.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kael/text/tokenizer.hpp"
#include "serve/http_error.hpp"
#include "serve/request.hpp"

using namespace kael;
using namespace kael::serve;

namespace {

using Words = std::vector<std::string_view>;  // key words a message must hold

const text::Tokenizer& tokenizer() {
  static const text::Tokenizer tok = text::Tokenizer::from_directory(KAEL_GPT2_TOKENIZER_DIR);
  return tok;
}

constexpr std::uint64_t kNextSeed = 4242;

CompletionRequest parse(std::string_view body, const RequestLimits& limits = {}) {
  return parse_completion_request(body, tokenizer(), limits, kNextSeed);
}

// The HttpError a call throws, or a failure (and a status-0 error) when it throws none.
template <typename Call>
HttpError error_of(Call&& call, std::string_view body) {
  try {
    call();
  } catch (const HttpError& e) {
    return e;
  }
  ADD_FAILURE() << "no HttpError for " << body;
  return HttpError(0, "(accepted)");
}

// Checks the status, the param and that the message holds each of `words`.
void expect_error(const HttpError& e, int status, std::string_view param, const Words& words,
                  std::string_view body) {
  EXPECT_EQ(e.status(), status) << body << " -> " << e.what();
  EXPECT_EQ(e.param(), param) << body << " -> " << e.what();
  EXPECT_EQ(e.type(), "invalid_request_error") << body;
  const std::string message = e.what();
  for (std::string_view word : words)
    EXPECT_NE(message.find(word), std::string::npos) << body << " -> \"" << message << "\" lacks \"" << word << "\"";
}

void expect_refused(std::string_view body, int status, std::string_view param,
                    Words words, const RequestLimits& limits = {}) {
  expect_error(error_of([&] { parse(body, limits); }, body), status, param, words, body);
}

// {"prompt": "Hi", <extra>}: a valid request but for the field under test.
std::string with(std::string_view extra) { return std::string(R"({"prompt": "Hi", )") + std::string(extra) + "}"; }

std::string ids_json(std::size_t n, std::int32_t id) {
  std::string out = "[";
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) out += ',';
    out += std::to_string(id);
  }
  return out + "]";
}

const std::vector<std::int32_t> kHello{15496};  // "Hello"

}  // namespace

TEST(CompletionRequest, AMinimalRequestTakesTheDefaults) {
  const CompletionRequest r = parse(R"({"prompt": "Hello, world"})");
  EXPECT_EQ(r.prompt_ids, tokenizer().encode("Hello, world"));
  EXPECT_EQ(r.prompt_ids, (std::vector<std::int32_t>{15496, 11, 995}));
  EXPECT_EQ(r.prompt_text, "Hello, world");
  EXPECT_EQ(r.model, "");
  EXPECT_EQ(r.options.max_new_tokens, RequestLimits{}.default_max_tokens);
  EXPECT_EQ(r.options.sampling.temperature, 1.0f);
  EXPECT_EQ(r.options.sampling.top_p, 1.0f);
  EXPECT_EQ(r.options.sampling.top_k, 0);
  EXPECT_EQ(r.options.sampling.repetition_penalty, 1.0f);
  EXPECT_EQ(r.options.sampling.seed, kNextSeed);
  EXPECT_TRUE(r.options.stop.empty());
  EXPECT_TRUE(r.options.sampling.logit_bias.empty());
  EXPECT_FALSE(r.options.logprobs);
  EXPECT_FALSE(r.return_logprobs);
  EXPECT_FALSE(r.options.ignore_eos);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.echo);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.n, 1);
  EXPECT_EQ(r.best_of, 1);
  EXPECT_FALSE(r.use_beam_search);
}

TEST(CompletionRequest, EveryFieldGivenIsRead) {
  const CompletionRequest r = parse(R"({"model": "gpt2", "prompt": [15496, 11], "max_tokens": 7, "temperature": 0,
    "top_p": 0.5, "top_k": 40, "min_p": 0.1, "presence_penalty": 1.5, "frequency_penalty": -1,
    "repetition_penalty": 1.3, "seed": 99, "stop": ["\n", "END"], "ignore_eos": true, "logprobs": 2,
    "logit_bias": {"50256": -100, "11": 5.5}, "no_repeat_ngram_size": 3, "echo": true, "stream": true,
    "stream_options": {"include_usage": false}})");
  EXPECT_EQ(r.model, "gpt2");
  EXPECT_EQ(r.prompt_ids, (std::vector<std::int32_t>{15496, 11}));
  EXPECT_EQ(r.prompt_text, "Hello,");
  EXPECT_EQ(r.options.max_new_tokens, 7);
  EXPECT_TRUE(r.options.sampling.greedy());
  EXPECT_EQ(r.options.sampling.top_p, 0.5f);
  EXPECT_EQ(r.options.sampling.top_k, 40);
  EXPECT_EQ(r.options.sampling.min_p, 0.1f);
  EXPECT_EQ(r.options.sampling.presence_penalty, 1.5f);
  EXPECT_EQ(r.options.sampling.frequency_penalty, -1.0f);
  EXPECT_EQ(r.options.sampling.repetition_penalty, 1.3f);
  EXPECT_EQ(r.options.sampling.seed, 99u);
  EXPECT_EQ(r.options.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_TRUE(r.options.ignore_eos);
  EXPECT_TRUE(r.options.logprobs);
  EXPECT_EQ(r.options.top_logprobs, 2);
  EXPECT_TRUE(r.return_logprobs);
  EXPECT_EQ(r.options.sampling.logit_bias, (std::map<std::int32_t, float>{{50256, -100.0f}, {11, 5.5f}}));
  EXPECT_EQ(r.options.sampling.no_repeat_ngram_size, 3);
  EXPECT_TRUE(r.echo);
  EXPECT_TRUE(r.stream);
  EXPECT_FALSE(r.include_usage);
}

TEST(CompletionRequest, ThePromptIsAStringTokenIdsOrAListOfOneOfThose) {
  for (const char* body : {R"({"prompt": "Hello"})", R"({"prompt": [15496]})", R"({"prompt": ["Hello"]})",
                           R"({"prompt": [[15496]]})"}) {
    const CompletionRequest r = parse(body);
    EXPECT_EQ(r.prompt_ids, kHello) << body;
    EXPECT_EQ(r.prompt_text, "Hello") << body;
  }
}

TEST(CompletionRequest, AMissingEmptyOrMalformedPromptIsRefused) {
  expect_refused(R"({"max_tokens": 3})", 400, "prompt", {"required"});
  expect_refused(R"({"prompt": null})", 400, "prompt", {"required"});
  expect_refused(R"({"prompt": ""})", 400, "prompt", {"empty"});
  expect_refused(R"({"prompt": []})", 400, "prompt", {"empty"});
  expect_refused(R"({"prompt": [[]]})", 400, "prompt", {"empty"});
  expect_refused(R"({"prompt": 5})", 400, "prompt", {"must be a string or an array", "number"});
  expect_refused(R"({"prompt": {"text": "Hi"}})", 400, "prompt", {"must be a string or an array", "object"});
  expect_refused(R"({"prompt": ["a", "b"]})", 400, "prompt", {"only one prompt", "2"});
  expect_refused(R"({"prompt": [[1], [2]]})", 400, "prompt", {"only one prompt"});
  expect_refused(R"({"prompt": [["a"]]})", 400, "prompt", {"string or token ids"});
  expect_refused(R"({"prompt": [1, "a"]})", 400, "prompt", {"must be integers", "string"});
  expect_refused(R"({"prompt": [1, 2.5]})", 400, "prompt", {"must be integers", "non-integer 2.5"});
}

TEST(CompletionRequest, PromptTokenIdsMustBeInTheVocabulary) {
  RequestLimits limits;
  limits.vocab_size = 1000;
  EXPECT_EQ(parse(R"({"prompt": [0, 999]})", limits).prompt_ids, (std::vector<std::int32_t>{0, 999}));
  expect_refused(R"({"prompt": [1000]})", 400, "prompt", {"1000", "outside the vocabulary [0, 1000)"}, limits);
  expect_refused(R"({"prompt": [[5, -1]]})", 400, "prompt", {"-1", "outside the vocabulary"}, limits);
  expect_refused(R"({"prompt": [9223372036854775808]})", 400, "prompt", {"outside the vocabulary"}, limits);
  expect_refused(R"({"prompt": [18446744073709551616]})", 400, "prompt", {"too large for 64 bits"}, limits);
}

TEST(CompletionRequest, ABodyThatIsNotAJsonObjectIsRefused) {
  for (const char* body : {"", "not json", R"({"prompt": "Hi")", R"({"prompt": "Hi",})", "{'prompt': 'Hi'}"})
    expect_refused(body, 400, "", {"not valid JSON"});
  expect_refused(R"(["Hi"])", 400, "", {"must be a JSON object", "array"});
  expect_refused(R"("Hi")", 400, "", {"must be a JSON object", "string"});
  expect_refused("null", 400, "", {"must be a JSON object", "null"});
}

TEST(CompletionRequest, DeepNestingIsRefusedBeforeAnyMessageQuotesTheValue) {
  // Both fields' messages quote the value with dump(), which recurses once per level.
  const std::string deep = std::string(50'000, '[') + std::string(50'000, ']');
  expect_refused(R"({"prompt": "Hi", "logit_bias": {"1": )" + deep + "}}", 400, "", {"the request body nests deeper than 64 levels"});
  expect_refused(R"({"prompt": "Hi", "use_beam_search": true, "best_of": 2, "early_stopping": )" + deep + "}", 400, "",
                 {"nests deeper"});
  expect_refused(R"({"text": )" + deep + "}", 400, "", {"nests deeper"});
  // A long value is quoted in part.
  std::string many = "[0";
  for (int i = 0; i < 1000; ++i) many += ",1";
  expect_refused(R"({"prompt": "Hi", "logit_bias": {"1": )" + many + "]}}", 400, "logit_bias", {"[0,1,1", "... (2003 bytes)"});
}

TEST(CompletionRequest, AFieldOfTheWrongTypeIsRefusedByName) {
  struct Case {
    const char* field;
    const char* param;
    Words words;
  };
  const Case cases[] = {
      {R"("max_tokens": "5")", "max_tokens", {"must be an integer", "string"}},
      {R"("max_tokens": 5.5)", "max_tokens", {"must be an integer", "non-integer 5.5"}},
      {R"("max_tokens": true)", "max_tokens", {"must be an integer", "boolean"}},
      {R"("n": [2])", "n", {"must be an integer", "array"}},
      {R"("temperature": "hot")", "temperature", {"must be a number", "string"}},
      {R"("top_p": null, "min_p": {})", "min_p", {"must be a number", "object"}},
      {R"("seed": 1.5)", "seed", {"must be an integer", "non-integer"}},
      {R"("seed": "7")", "seed", {"must be an integer", "string"}},
      {R"("logprobs": true)", "logprobs", {"must be an integer", "boolean"}},
      {R"("stream": 1)", "stream", {"must be a boolean", "number"}},
      {R"("echo": "yes")", "echo", {"must be a boolean", "string"}},
      {R"("ignore_eos": 0)", "ignore_eos", {"must be a boolean"}},
      {R"("model": 3)", "model", {"must be a string", "number"}},
      {R"("stop": 5)", "stop", {"must be a string or an array of strings", "number"}},
      {R"("stop": ["a", 1])", "stop", {"must hold strings", "number"}},
      {R"("logit_bias": [1])", "logit_bias", {"must be an object", "array"}},
      {R"("stream_options": true)", "stream_options", {"must be an object", "boolean"}},
      {R"("use_beam_search": "true")", "use_beam_search", {"must be a boolean"}},
  };
  for (const Case& c : cases) expect_refused(with(c.field), 400, c.param, c.words);
}

TEST(CompletionRequest, NullMeansAbsent) {
  const CompletionRequest r = parse(with(R"("max_tokens": null, "temperature": null, "stop": null, "seed": null,
                                           "logprobs": null, "n": null, "model": null)"));
  EXPECT_EQ(r.options.max_new_tokens, RequestLimits{}.default_max_tokens);
  EXPECT_EQ(r.options.sampling.temperature, 1.0f);
  EXPECT_TRUE(r.options.stop.empty());
  EXPECT_EQ(r.options.sampling.seed, kNextSeed);
  EXPECT_FALSE(r.options.logprobs);
  EXPECT_EQ(r.n, 1);
  EXPECT_EQ(r.model, "");
}

TEST(CompletionRequest, NumbersOutsideTheirRangesAreRefusedAndTheBoundsAccepted) {
  struct Case {
    const char* field;
    const char* param;
    const char* range;
  };
  const Case refused[] = {
      {R"("max_tokens": -1)", "max_tokens", "[0, 1073741824]"},
      {R"("max_tokens": 1073741825)", "max_tokens", "[0, 1073741824]"},
      {R"("temperature": 2.01)", "temperature", "[0, 2]"},
      {R"("temperature": -0.5)", "temperature", "[0, 2]"},
      {R"("top_p": 0)", "top_p", "(0, 1]"},
      {R"("top_p": 1.5)", "top_p", "(0, 1]"},
      {R"("top_k": -1)", "top_k", "[0, 50257]"},
      {R"("top_k": 50258)", "top_k", "[0, 50257]"},
      {R"("min_p": 1.01)", "min_p", "[0, 1]"},
      {R"("presence_penalty": 2.5)", "presence_penalty", "[-2, 2]"},
      {R"("frequency_penalty": -2.5)", "frequency_penalty", "[-2, 2]"},
      {R"("repetition_penalty": 0)", "repetition_penalty", "(0, 100]"},
      {R"("repetition_penalty": 101)", "repetition_penalty", "(0, 100]"},
      {R"("logprobs": -1)", "logprobs", "[0, 20]"},
      {R"("logprobs": 21)", "logprobs", "[0, 20]"},
      {R"("no_repeat_ngram_size": 1025)", "no_repeat_ngram_size", "[0, 1024]"},
      {R"("n": 0)", "n", "[1, "},
      {R"("best_of": -3)", "best_of", "[1, "},
      {R"("length_penalty": 1000, "use_beam_search": true, "best_of": 2)", "length_penalty", "[-100, 100]"},
  };
  for (const Case& c : refused) expect_refused(with(c.field), 400, c.param, {"must be in", c.range});

  const CompletionRequest r = parse(with(R"("max_tokens": 0, "temperature": 2, "top_p": 1, "top_k": 50257,
      "min_p": 1, "presence_penalty": -2, "frequency_penalty": 2, "repetition_penalty": 100, "logprobs": 20,
      "no_repeat_ngram_size": 1024)"));
  EXPECT_EQ(r.options.max_new_tokens, 0);
  EXPECT_EQ(r.options.sampling.temperature, 2.0f);
  EXPECT_EQ(r.options.sampling.top_k, 50257);
  EXPECT_EQ(r.options.sampling.repetition_penalty, 100.0f);
  EXPECT_EQ(r.options.top_logprobs, 20);
  EXPECT_EQ(r.options.sampling.no_repeat_ngram_size, 1024);
}

TEST(CompletionRequest, IntegersPast64BitsAreRefusedNotWrapped) {
  // 2^64 and beyond arrive as doubles; 2^63 .. 2^64-1 as unsigned, which must not wrap negative.
  expect_refused(with(R"("max_tokens": 18446744073709551616)"), 400, "max_tokens", {"too large for 64 bits"});
  expect_refused(with(R"("max_tokens": 9223372036854775808)"), 400, "max_tokens", {"must be in [0, 1073741824]"});
  expect_refused(with(R"("max_tokens": 18446744073709551615)"), 400, "max_tokens", {"must be in [0, 1073741824]"});
  expect_refused(with(R"("n": 18446744073709551615)"), 400, "n", {"must be in [1, 9223372036854775807]"});
  expect_refused(with(R"("best_of": 9223372036854775807)"), 400, "best_of", {"at most 8"});
  expect_refused(with(R"("top_k": -9223372036854775809)"), 400, "top_k", {"too large for 64 bits"});
  expect_refused(with(R"("logprobs": 1e30)"), 400, "logprobs", {"too large for 64 bits"});
  expect_refused(with(R"("seed": 18446744073709551616)"), 400, "seed", {"too large for 64 bits"});
  // Any 64-bit seed is taken, a negative one as its two's complement.
  EXPECT_EQ(parse(with(R"("seed": 18446744073709551615)")).options.sampling.seed, UINT64_MAX);
  EXPECT_EQ(parse(with(R"("seed": -1)")).options.sampling.seed, UINT64_MAX);
  EXPECT_EQ(parse(with(R"("seed": -9223372036854775808)")).options.sampling.seed, std::uint64_t{1} << 63);
}

TEST(CompletionRequest, PromptPlusMaxTokensMustFitTheContext) {
  RequestLimits limits;
  limits.n_positions = 64;
  const std::string prompt60 = ids_json(60, 11);
  EXPECT_EQ(parse(R"({"max_tokens": 4, "prompt": )" + prompt60 + "}", limits).options.max_new_tokens, 4);
  expect_refused(R"({"max_tokens": 5, "prompt": )" + prompt60 + "}", 400, "max_tokens",
                 {"maximum context length is 64", "65 tokens", "60 in your prompt", "5 for the completion"}, limits);
  // The default max_tokens (16) counts too.
  expect_refused(R"({"prompt": )" + prompt60 + "}", 400, "max_tokens", {"76 tokens", "16 for the completion"}, limits);
  // max_tokens at the top of its loose range gets the context message, not a range error.
  expect_refused(with(R"("max_tokens": 1073741824)"), 400, "max_tokens", {"maximum context length is 64"}, limits);
  // A prompt past the context on its own, text or ids.
  expect_refused(R"({"max_tokens": 0, "prompt": )" + ids_json(65, 11) + "}", 400, "max_tokens",
                 {"65 in your prompt"}, limits);
  std::string text65;
  for (int i = 0; i < 65; ++i) text65 += " a";  // one token each
  expect_refused(R"({"max_tokens": 0, "prompt": ")" + text65 + "\"}", 400, "max_tokens",
                 {"65 in your prompt"}, limits);
  EXPECT_EQ(parse(R"({"max_tokens": 0, "prompt": )" + ids_json(64, 11) + "}", limits).prompt_ids.size(), 64u);
}

TEST(CompletionRequest, AStringPromptPastTheTextBoundIs413) {
  // The default bound, 1 MiB, checked before the text is tokenized.
  const std::string big((std::size_t{1} << 20) + 1, 'a');
  expect_refused(R"({"prompt": ")" + big + "\"}", 413, "prompt", {"1048577 bytes", "at most 1048576 bytes"});
  expect_refused(R"({"prompt": [")" + big + "\"]}", 413, "prompt", {"1048577 bytes"});
  // A lower bound, at its edge; token ids are not text and are bounded by the context instead.
  RequestLimits limits;
  limits.max_text_bytes = 100;
  EXPECT_EQ(parse(R"({"prompt": ")" + std::string(100, 'x') + "\"}", limits).prompt_text.size(), 100u);
  expect_refused(R"({"prompt": ")" + std::string(101, 'x') + "\"}", 413, "prompt", {"101 bytes", "at most 100"},
                 limits);
  EXPECT_EQ(parse(R"({"max_tokens": 1, "prompt": )" + ids_json(200, 87) + "}", limits).prompt_ids.size(), 200u);
}

TEST(CompletionRequest, NAndBestOfAreBoundedByTheServerAndOrdered) {
  RequestLimits limits;
  limits.max_choices = 4;
  const CompletionRequest two = parse(with(R"("n": 2)"), limits);
  EXPECT_EQ(two.n, 2);
  EXPECT_EQ(two.best_of, 2);  // defaults to n
  EXPECT_FALSE(two.options.logprobs);
  const CompletionRequest ranked = parse(with(R"("n": 2, "best_of": 4)"), limits);
  EXPECT_EQ(ranked.best_of, 4);
  EXPECT_TRUE(ranked.options.logprobs);  // ranking needs each token's log-probability
  EXPECT_FALSE(ranked.return_logprobs);  // but the response has none
  expect_refused(with(R"("n": 5)"), 400, "n", {"at most 4 on this server", "5"}, limits);
  expect_refused(with(R"("best_of": 5)"), 400, "best_of", {"at most 4"}, limits);
  expect_refused(with(R"("n": 3, "best_of": 2)"), 400, "best_of", {"must be >= 'n'"}, limits);
  expect_refused(with(R"("best_of": 2, "stream": true)"), 400, "best_of", {"cannot be streamed"}, limits);
  EXPECT_TRUE(parse(with(R"("n": 2, "best_of": 2, "stream": true)"), limits).stream);
}

TEST(CompletionRequest, StopStringsAreCountedAndSized) {
  EXPECT_EQ(parse(with(R"("stop": "\n")")).options.stop, (std::vector<std::string>{"\n"}));
  EXPECT_TRUE(parse(with(R"("stop": [])")).options.stop.empty());
  EXPECT_EQ(parse(with(R"("stop": ["a", "b", "c", "d"])")).options.stop.size(), 4u);
  expect_refused(with(R"("stop": ["a", "b", "c", "d", "e"])"), 400, "stop", {"at most 4 strings", "found 5"});
  expect_refused(with(R"("stop": "")"), 400, "stop", {"must not be empty"});
  expect_refused(with(R"("stop": ["a", ""])"), 400, "stop", {"must not be empty"});
  const std::string longest(256, 's');
  EXPECT_EQ(parse(with(R"("stop": ")" + longest + "\"")).options.stop.front(), longest);
  expect_refused(with(R"("stop": [")" + longest + "s\"]"), 400, "stop", {"at most 256 bytes", "found 257"});
  RequestLimits limits;
  limits.max_stop = 1;
  expect_refused(with(R"("stop": ["a", "b"])"), 400, "stop", {"at most 1 strings"}, limits);
}

TEST(CompletionRequest, LogprobsAsksForThatManyAlternatives) {
  const CompletionRequest none = parse(with(R"("max_tokens": 1)"));
  EXPECT_FALSE(none.options.logprobs);
  EXPECT_FALSE(none.return_logprobs);
  const CompletionRequest zero = parse(with(R"("logprobs": 0)"));
  EXPECT_TRUE(zero.options.logprobs);  // the chosen token's log-probability, no alternatives
  EXPECT_TRUE(zero.return_logprobs);
  EXPECT_EQ(zero.options.top_logprobs, 0);
  EXPECT_EQ(parse(with(R"("logprobs": 5)")).options.top_logprobs, 5);
  RequestLimits limits;
  limits.max_logprobs = 5;
  expect_refused(with(R"("logprobs": 6)"), 400, "logprobs", {"must be in [0, 5]"}, limits);
}

TEST(CompletionRequest, LogitBiasKeysAreTokenIdsAndValuesAreBounded) {
  EXPECT_EQ(parse(with(R"("logit_bias": {"0": 100, "50256": -100})")).options.sampling.logit_bias,
            (std::map<std::int32_t, float>{{0, 100.0f}, {50256, -100.0f}}));
  for (const char* key : {"-1", "abc", "1.5", "", " 5", "+5", "5x", "99999999999999999999"})
    expect_refused(with(std::string(R"("logit_bias": {")") + key + R"(": 1})"), 400, "logit_bias",
                   {"keys must be token ids"});
  expect_refused(with(R"("logit_bias": {"50257": 1})"), 400, "logit_bias", {"outside the vocabulary [0, 50257)"});
  expect_refused(with(R"("logit_bias": {"11": 100.5})"), 400, "logit_bias", {"[-100, 100]", "100.5"});
  expect_refused(with(R"("logit_bias": {"11": "up"})"), 400, "logit_bias", {"[-100, 100]"});
  expect_refused(with(R"("logit_bias": {"11": null})"), 400, "logit_bias", {"[-100, 100]"});
}

TEST(CompletionRequest, UnknownFieldsAreIgnoredAndUnsupportedOnesRefused) {
  const CompletionRequest r = parse(with(R"("user": "someone", "frobnicate": {"deep": [1, 2]}, "suffix": "")"));
  EXPECT_EQ(r.prompt_text, "Hi");
  EXPECT_EQ(r.prompt_ids, parse(R"({"prompt": "Hi"})").prompt_ids);
  expect_refused(with(R"("suffix": "tail")"), 400, "suffix", {"not supported"});
  expect_refused(with(R"("length_penalty": 1)"), 400, "length_penalty", {"needs \"use_beam_search\": true"});
  expect_refused(with(R"("early_stopping": true)"), 400, "early_stopping", {"use_beam_search"});
}

TEST(CompletionRequest, BeamSearchTakesBestOfBeamsAndRefusesWhatItCannotDo) {
  const CompletionRequest r = parse(with(R"("use_beam_search": true, "n": 2, "best_of": 3, "max_tokens": 5,
                                           "length_penalty": 0.5, "early_stopping": "never", "temperature": 0)"));
  EXPECT_TRUE(r.use_beam_search);
  EXPECT_EQ(r.beams.num_beams, 3);
  EXPECT_EQ(r.beams.num_return_sequences, 2);
  EXPECT_EQ(r.beams.max_new_tokens, 5);
  EXPECT_EQ(r.beams.length_penalty, 0.5f);
  EXPECT_EQ(r.beams.early_stopping, generate::EarlyStopping::never);
  EXPECT_FALSE(r.options.logprobs);  // beams are ranked by their own scores
  EXPECT_EQ(parse(with(R"("use_beam_search": true, "best_of": 2, "early_stopping": true)")).beams.early_stopping,
            generate::EarlyStopping::when_full);

  const std::string beams = R"("use_beam_search": true, "best_of": 2, )";
  expect_refused(with(beams + R"("stream": true)"), 400, "stream", {"cannot be streamed"});
  expect_refused(with(beams + R"("logprobs": 1)"), 400, "logprobs", {"not supported with beam search"});
  expect_refused(with(beams + R"("stop": "x")"), 400, "stop", {"not supported with beam search"});
  expect_refused(with(beams + R"("temperature": 0.7)"), 400, "temperature", {"does not sample"});
  expect_refused(with(beams + R"("top_p": 0.9)"), 400, "top_p", {"does not sample"});
  expect_refused(with(beams + R"("repetition_penalty": 1.2)"), 400, "repetition_penalty", {"does not sample"});
  expect_refused(with(beams + R"("early_stopping": "sometimes")"), 400, "early_stopping", {"\"never\""});
  expect_refused(with(beams + R"("max_tokens": 0)"), 400, "max_tokens", {"'max_tokens' >= 1"});
  expect_refused(with(R"("use_beam_search": true)"), 400, "best_of", {"beam search needs 'best_of'", ">= 2"});
}

TEST(CompletionRequest, StreamOptionsSayWhetherUsageIsSent) {
  EXPECT_TRUE(parse(with(R"("stream": true)")).include_usage);
  EXPECT_FALSE(parse(with(R"("stream": true, "stream_options": {"include_usage": false})")).include_usage);
  EXPECT_TRUE(parse(with(R"("stream": true, "stream_options": {})")).include_usage);
  expect_refused(with(R"("stream_options": {"include_usage": "no"})"), 400, "include_usage", {"must be a boolean"});
}

TEST(TokenizeRequest, TakesTextOrPromptAndTheSpecialTokensFlag) {
  const RequestLimits limits;
  const TokenizeRequest plain = parse_tokenize_request(R"({"text": "Hello <|endoftext|>"})", limits);
  EXPECT_EQ(plain.text, "Hello <|endoftext|>");
  EXPECT_FALSE(plain.allow_special);
  const TokenizeRequest special = parse_tokenize_request(R"({"prompt": "Hi", "allow_special": true})", limits);
  EXPECT_EQ(special.text, "Hi");
  EXPECT_TRUE(special.allow_special);
  EXPECT_EQ(parse_tokenize_request(R"({"text": ""})", limits).text, "");

  const auto refused = [&](std::string_view body, std::string_view param, Words words) {
    expect_error(error_of([&] { parse_tokenize_request(body, limits); }, body), 400, param, words, body);
  };
  refused(R"({})", "text", {"required"});
  refused(R"({"text": null})", "text", {"required"});
  refused(R"({"text": 5})", "text", {"must be a string", "number"});
  refused(R"({"prompt": ["Hi"]})", "prompt", {"must be a string", "array"});
  refused(R"({"text": "Hi", "allow_special": "yes"})", "allow_special", {"must be a boolean"});
  refused(R"(["Hi"])", "", {"must be a JSON object"});
  refused(R"({"text": )", "", {"not valid JSON"});
}

TEST(TokenizeRequest, TextPastTheBoundIs413) {
  RequestLimits limits;
  limits.max_text_bytes = 10;
  EXPECT_EQ(parse_tokenize_request(R"({"text": "0123456789"})", limits).text.size(), 10u);
  const std::string body = R"({"text": "0123456789A"})";
  expect_error(error_of([&] { parse_tokenize_request(body, limits); }, body), 413, "text",
               {"11 bytes", "at most 10 bytes"}, body);
  const std::string big = R"({"text": ")" + std::string((std::size_t{1} << 20) + 1, 'a') + "\"}";
  expect_error(error_of([&] { parse_tokenize_request(big, RequestLimits{}); }, "1 MiB + 1"), 413, "text",
               {"1048577 bytes"}, "1 MiB + 1");
}

TEST(DetokenizeRequest, TakesIdsOrTokensEachInsideTheVocabulary) {
  EXPECT_EQ(parse_detokenize_request(R"({"ids": [15496, 11, 0, 50256]})", 50257),
            (std::vector<std::int32_t>{15496, 11, 0, 50256}));
  EXPECT_EQ(parse_detokenize_request(R"({"tokens": [995]})", 50257), (std::vector<std::int32_t>{995}));
  EXPECT_TRUE(parse_detokenize_request(R"({"ids": []})", 50257).empty());

  const auto refused = [](std::string_view body, std::int64_t vocab, std::string_view param,
                          Words words) {
    expect_error(error_of([&] { parse_detokenize_request(body, vocab); }, body), 400, param, words, body);
  };
  refused(R"({"ids": [50257]})", 50257, "ids", {"50257", "outside the vocabulary [0, 50257)"});
  refused(R"({"ids": [3, 100]})", 100, "ids", {"token id 100", "[0, 100)"});
  refused(R"({"tokens": [-1]})", 50257, "tokens", {"-1", "outside the vocabulary"});
  refused(R"({"ids": [18446744073709551615]})", 50257, "ids", {"outside the vocabulary"});
  refused(R"({"ids": [18446744073709551616]})", 50257, "ids", {"must be integers", "too large for 64 bits"});
  refused(R"({"ids": [1.5]})", 50257, "ids", {"must be integers", "non-integer 1.5"});
  refused(R"({"ids": ["1"]})", 50257, "ids", {"must be integers", "string"});
  refused(R"({"ids": "1 2"})", 50257, "ids", {"must be an array", "string"});
  refused(R"({"tokens": {"0": 1}})", 50257, "tokens", {"must be an array", "object"});
  refused(R"({})", 50257, "ids", {"required"});
  refused(R"({"ids": null})", 50257, "ids", {"required"});
  refused(R"([1, 2])", 50257, "", {"must be a JSON object"});
}
