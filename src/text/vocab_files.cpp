#include "text/vocab_files.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "kael/core/error.hpp"
#include "text/byte_symbols.hpp"

namespace kael::text {
namespace {

// Long or binary text shortened for an error message.
std::string excerpt(std::string_view text) {
  constexpr std::size_t kMax = 60;
  std::string out = nlohmann::json(std::string(text.substr(0, kMax))).dump(-1, ' ', false,
                                                                           nlohmann::json::error_handler_t::replace);
  if (text.size() > kMax) out += "...";
  return out;
}

// nlohmann's parse errors quote the token they stopped in, which may be the whole file.
std::string bounded(std::string_view message) {
  constexpr std::size_t kMax = 200;
  if (message.size() <= kMax) return std::string(message);
  return str(message.substr(0, kMax), "... (", message.size(), " bytes)");
}

// Builds the vocabulary from SAX events, accepting only {"token": id, ...}. A SAX parser never
// builds a tree, so deep nesting in a hostile file costs nothing.
class VocabHandler : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit VocabHandler(const std::string& source) : source_(source) {}

  bool start_object(std::size_t) override {
    if (depth_++ == 0 && !started_) {  // the one object allowed: the top level
      started_ = true;
      return true;
    }
    return fail("expected an integer id for token " + excerpt(key_) + ", found an object");
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool key(string_t& key) override {
    auto bytes = symbols_to_bytes(key);
    if (!bytes) return fail("token " + excerpt(key) + " is not made of GPT-2 byte symbols");
    if (bytes->empty()) return fail("the empty string is not a token");
    key_ = key;
    bytes_ = std::move(*bytes);
    return true;
  }
  bool number_unsigned(number_unsigned_t value) override {
    if (depth_ != 1) return not_object();
    if (value > kMaxTokenId)
      return fail(str("id ", value, " of token ", excerpt(key_), " is above the limit ", kMaxTokenId));
    return add(static_cast<std::uint32_t>(value));
  }
  bool number_integer(number_integer_t value) override {
    if (depth_ != 1) return not_object();
    if (value < 0) return fail(str("id ", value, " of token ", excerpt(key_), ": expected a non-negative integer"));
    return number_unsigned(static_cast<number_unsigned_t>(value));
  }
  bool number_float(number_float_t, const string_t& text) override { return wrong_value("the number " + text); }
  bool null() override { return wrong_value("null"); }
  bool boolean(bool) override { return wrong_value("a boolean"); }
  bool string(string_t& value) override { return wrong_value("the string " + excerpt(value)); }
  bool binary(binary_t&) override { return wrong_value("binary data"); }
  bool start_array(std::size_t) override { return wrong_value("an array"); }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    return fail("invalid JSON: " + bounded(e.what()));
  }

  VocabFile take() {
    if (!started_) fail("expected a JSON object of tokens to ids");
    if (!error_.empty()) throw ValueError(error_);
    return std::move(vocab_);
  }

 private:
  bool add(std::uint32_t id) {
    if (id >= vocab_.tokens.size()) {
      vocab_.tokens.resize(id + 1);
      vocab_.present.resize(id + 1, false);
    }
    if (vocab_.present[id])
      return fail(str("id ", id, " is used by both ", excerpt(bytes_to_symbols(vocab_.tokens[id])), " and ", excerpt(key_)));
    if (!seen_.emplace(bytes_, id).second) return fail("token " + excerpt(key_) + " appears twice");
    vocab_.tokens[id] = bytes_;
    vocab_.present[id] = true;
    return true;
  }
  bool not_object() { return fail("expected a JSON object of tokens to ids, found a number"); }
  bool wrong_value(const std::string& found) {
    if (depth_ == 0) return fail("expected a JSON object of tokens to ids, found " + found);
    return fail("expected a non-negative integer id for token " + excerpt(key_) + ", found " + found);
  }
  bool fail(const std::string& message) {
    if (error_.empty()) error_ = source_ + ": " + message;
    return false;
  }

  const std::string& source_;
  VocabFile vocab_;
  std::unordered_map<std::string, std::uint32_t> seen_;
  std::string key_, bytes_, error_;
  int depth_ = 0;
  bool started_ = false;
};

}  // namespace

VocabFile parse_vocab_json(const std::string& json, const std::string& source) {
  VocabHandler handler(source);
  try {
    nlohmann::json::sax_parse(json, &handler);
  } catch (const nlohmann::json::exception& e) {
    throw ValueError(source + ": invalid JSON: " + bounded(e.what()));
  }
  return handler.take();
}

std::vector<MergeLine> parse_merges_txt(const std::string& text, const std::string& source) {
  std::vector<MergeLine> merges;
  std::size_t line_number = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line_number == 1 && line.starts_with("#version")) continue;

    const std::size_t space = line.find(' ');
    if (space == 0 || space == std::string_view::npos || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos)
      throw ValueError(str(source, " line ", line_number, ": expected two symbols separated by one space, found ",
                           excerpt(line)));
    auto left = symbols_to_bytes(line.substr(0, space));
    auto right = symbols_to_bytes(line.substr(space + 1));
    if (!left || !right)
      throw ValueError(str(source, " line ", line_number, ": ", excerpt(line), " is not made of GPT-2 byte symbols"));
    merges.push_back({std::move(*left), std::move(*right), line_number});
  }
  return merges;
}

}  // namespace kael::text
