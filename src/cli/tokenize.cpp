// `kael tokenize` and `kael detokenize`: text to GPT-2 token ids and back (docs/behaviour.md,
// "Command line").
//
//   kael tokenize [--model DIR] [TEXT | --file F | --jsonl] [--json] [--allow-special]
//     ids of TEXT, of file F ("-" is stdin), or of all of stdin when neither is given, space
//     separated (or a JSON array with --json). --jsonl reads one JSON string a line on stdin and
//     writes one JSON array of ids a line, in order.
//   kael detokenize [--model DIR] [IDS... | --jsonl]
//     the bytes of the ids ("1,2,3" or "1 2 3", or read from stdin when none are given), written
//     to stdout exactly, even when they are not valid UTF-8. --jsonl reads one JSON array of ids
//     a line and writes one JSON string a line (invalid UTF-8 becomes U+FFFD there, since a
//     JSON string cannot hold it).
#include <charconv>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/default_model.hpp"
#include "kael/core/error.hpp"
#include "kael/core/file.hpp"
#include "kael/core/json.hpp"
#include "kael/text/tokenizer.hpp"

namespace kael::cli {
namespace {

void write_stdout(std::string_view bytes) {
  if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size()) throw Error("cannot write to stdout");
}

// Input is tokenized in memory, at about 20 bytes per byte at worst: a whole input, and one
// --jsonl line, may hold this much.
constexpr std::size_t kMaxInputBytes = std::size_t{1} << 30;

[[noreturn]] void throw_too_long(const std::string& what) {
  throw ValueError(str(what, " is longer than ", kMaxInputBytes, " bytes"));
}

std::string read_all(std::FILE* in, const std::string& name) {
  std::string bytes;
  char buffer[1 << 16];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), in)) > 0) {
    if (bytes.size() + n > kMaxInputBytes) throw_too_long(name);
    bytes.append(buffer, n);
  }
  if (std::ferror(in)) throw Error("cannot read " + name);
  return bytes;
}

std::string read_file(const std::string& path) {
  if (path == "-") return read_all(stdin, "stdin");
  return read_regular_file(path, "--file", kMaxInputBytes);
}

// The next line of stdin, without its '\n', into `line`; false at the end of the input.
bool read_stdin_line(std::string& line, std::size_t number) {
  line.clear();
  int c;
  while ((c = getc_unlocked(stdin)) != EOF) {
    if (c == '\n') return true;
    if (line.size() == kMaxInputBytes) throw_too_long(str("stdin line ", number));
    line.push_back(static_cast<char>(c));
  }
  if (std::ferror(stdin)) throw Error("cannot read stdin");
  return !line.empty();
}

// Appends "1 2 3" (or "[1,2,3]") to out.
void append_ids(std::string& out, const std::vector<std::int32_t>& ids, bool json) {
  if (json) out += '[';
  char number[16];
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += json ? ',' : ' ';
    const auto end = std::to_chars(number, number + sizeof(number), ids[i]).ptr;
    out.append(number, end);
  }
  if (json) out += ']';
}

// ---- tokenize

struct TokenizeArgs {
  std::string model_dir;  // empty: resolve_tokenizer_dir() picks data/gpt2 or the bundled model
  std::string text;
  std::string file;
  bool jsonl = false;
  bool json = false;
  bool allow_special = false;
  CLI::Option* text_option = nullptr;
  CLI::Option* file_option = nullptr;
};

int run_jsonl_tokenize(const text::Tokenizer& tokenizer, bool allow_special) {
  std::string line, out;
  for (std::size_t number = 1; read_stdin_line(line, number); ++number) {
    const nlohmann::json value = json::parse(line, str("stdin line ", number));
    if (!value.is_string()) throw ValueError(str("stdin line ", number, ": expected a JSON string, found ", value.type_name()));
    out.clear();
    append_ids(out, tokenizer.encode(value.get_ref<const std::string&>(), allow_special), true);
    out += '\n';
    write_stdout(out);
    std::fflush(stdout);  // one answer per question, so a caller can drive it line by line
  }
  return 0;
}

int run_tokenize(const TokenizeArgs& args) {
  const int sources = (args.text_option->count() > 0) + (args.file_option->count() > 0) + args.jsonl;
  if (sources > 1) throw ValueError("give at most one of TEXT, --file and --jsonl");
  const auto tokenizer = text::Tokenizer::from_directory(resolve_tokenizer_dir(args.model_dir));
  if (args.jsonl) return run_jsonl_tokenize(tokenizer, args.allow_special);

  const std::string input = args.text_option->count() > 0 ? args.text
                            : args.file_option->count() > 0 ? read_file(args.file)
                                                             : read_all(stdin, "stdin");
  std::string out;
  append_ids(out, tokenizer.encode(input, args.allow_special), args.json);
  out += '\n';
  write_stdout(out);
  return 0;
}

RunFn setup_tokenize(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Print the GPT-2 token ids of text");
  cmd->add_option("--model", args->model_dir, kTokenizerHelp);
  args->text_option = cmd->add_option("text", args->text, "Text to tokenize (default: all of stdin)");
  args->file_option = cmd->add_option("--file", args->file, "Tokenize this file's bytes (- for stdin)");
  cmd->add_flag("--jsonl", args->jsonl, "Read one JSON string a line on stdin, write one JSON array of ids a line");
  cmd->add_flag("--json", args->json, "Print a JSON array instead of space-separated ids");
  cmd->add_flag("--allow-special", args->allow_special, "Encode the text <|endoftext|> as its special id 50256");
  return [args] { return run_tokenize(*args); };
}

// ---- detokenize

struct DetokenizeArgs {
  std::string model_dir;  // empty: resolve_tokenizer_dir() picks data/gpt2 or the bundled model
  std::vector<std::string> ids;
  bool jsonl = false;
};

// Token ids separated by commas and/or white space; ValueError naming a bad item.
std::vector<std::int32_t> parse_id_list(std::string_view list) {
  std::vector<std::int32_t> ids;
  auto is_separator = [](char c) { return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  for (std::size_t pos = 0; pos < list.size();) {
    if (is_separator(list[pos])) {
      ++pos;
      continue;
    }
    std::size_t end = pos;
    while (end < list.size() && !is_separator(list[end])) ++end;
    const std::string_view item = list.substr(pos, end - pos);
    std::int32_t id = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (ec != std::errc() || ptr != item.data() + item.size() || id < 0)
      throw ValueError(str("'", item, "' is not a token id (expected a non-negative integer)"));
    ids.push_back(id);
    pos = end;
  }
  return ids;
}

int run_jsonl_detokenize(const text::Tokenizer& tokenizer) {
  std::string line, out;
  for (std::size_t number = 1; read_stdin_line(line, number); ++number) {
    std::vector<std::int32_t> ids;
    try {
      const nlohmann::json value = json::parse(line, "the line");
      if (!value.is_array()) throw ValueError("not an array");
      for (const auto& id : value) {
        if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() > INT32_MAX)
          throw ValueError(str("'", id.dump(), "' is not a token id"));
        ids.push_back(id.get<std::int32_t>());
      }
    } catch (const std::exception& e) {
      throw ValueError(str("stdin line ", number, ": expected a JSON array of token ids (", e.what(), ")"));
    }
    out = nlohmann::json(tokenizer.decode(ids)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    out += '\n';
    write_stdout(out);
    std::fflush(stdout);
  }
  return 0;
}

int run_detokenize(const DetokenizeArgs& args) {
  if (args.jsonl && !args.ids.empty()) throw ValueError("give either IDS or --jsonl, not both");
  const auto tokenizer = text::Tokenizer::from_directory(resolve_tokenizer_dir(args.model_dir));
  if (args.jsonl) return run_jsonl_detokenize(tokenizer);

  std::vector<std::int32_t> ids;
  if (args.ids.empty()) {
    ids = parse_id_list(read_all(stdin, "stdin"));
  } else {
    for (const std::string& item : args.ids) {
      const auto more = parse_id_list(item);
      ids.insert(ids.end(), more.begin(), more.end());
    }
  }
  write_stdout(tokenizer.decode(ids));
  return 0;
}

RunFn setup_detokenize(CLI::App& app) {
  auto args = std::make_shared<DetokenizeArgs>();
  CLI::App* cmd = app.add_subcommand("detokenize", "Write the bytes of GPT-2 token ids");
  cmd->add_option("--model", args->model_dir, kTokenizerHelp);
  cmd->add_option("ids", args->ids, "Token ids: 1,2,3 or 1 2 3 (default: read from stdin)");
  cmd->add_flag("--jsonl", args->jsonl, "Read one JSON array of ids a line on stdin, write one JSON string a line");
  return [args] { return run_detokenize(*args); };
}

const Registration tokenize_registration("tokenize", setup_tokenize);
const Registration detokenize_registration("detokenize", setup_detokenize);

}  // namespace
}  // namespace kael::cli
