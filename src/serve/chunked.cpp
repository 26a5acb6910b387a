// ChunkedDecoder (chunked.hpp).
#include "serve/chunked.hpp"

#include <algorithm>

namespace kael::serve {
namespace {

// A size line or a trailer field longer than this is an attack, not a body.
constexpr std::size_t kMaxLineBytes = 1024;
constexpr std::size_t kMaxTrailerBytes = 8 * 1024;
// 15 hex digits: sizes below 2^60, so adding them up cannot overflow.
constexpr std::size_t kMaxSizeDigits = 15;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Moves bytes up to and including '\n' from `input` into `line`; true when the line is whole.
bool collect_line(std::string_view& input, std::string& line) {
  const std::size_t newline = input.find('\n');
  const std::size_t take = newline == std::string_view::npos ? input.size() : newline + 1;
  line.append(input.substr(0, take));
  input.remove_prefix(take);
  return newline != std::string_view::npos;
}

// The line without its CRLF, or false when it does not end in CRLF.
bool strip_crlf(std::string& line) {
  if (line.size() < 2 || line[line.size() - 2] != '\r') return false;
  line.resize(line.size() - 2);
  return true;
}

}  // namespace

ChunkedDecoder::Status ChunkedDecoder::fail(std::string message) {
  state_ = State::failed;
  error_ = std::move(message);
  return Status::malformed;
}

ChunkedDecoder::Status ChunkedDecoder::take_size_line() {
  if (!strip_crlf(line_)) return fail("a chunk-size line must end in CRLF");
  // chunk-size [; extensions]: extensions are allowed and ignored.
  const std::string_view size = std::string_view(line_).substr(0, line_.find(';'));
  if (size.empty() || size.size() > kMaxSizeDigits) return fail("a chunk size must be 1 to 15 hex digits");
  std::uint64_t value = 0;
  for (const char c : size) {
    const int digit = hex_value(c);
    if (digit < 0) return fail("a chunk size must be hex digits");
    value = value * 16 + static_cast<std::uint64_t>(digit);
  }
  line_.clear();
  remaining_ = value;
  state_ = value == 0 ? State::trailer : State::data;
  return Status::more;
}

ChunkedDecoder::Status ChunkedDecoder::take_trailer_line() {
  if (!strip_crlf(line_)) return fail("a trailer line must end in CRLF");
  const bool last = line_.empty();
  line_.clear();
  if (last) {
    state_ = State::done;
    return Status::done;
  }
  return Status::more;  // a trailer field: ignored
}

ChunkedDecoder::Status ChunkedDecoder::feed(std::string_view& input, std::string& output) {
  while (!input.empty() || state_ == State::done || state_ == State::failed) {
    switch (state_) {
      case State::size_line:
      case State::trailer: {
        const bool whole = collect_line(input, line_);
        if (line_.size() > kMaxLineBytes) return fail("a chunk-size or trailer line is too long");
        if (state_ == State::trailer && (trailer_bytes_ += line_.size()) > kMaxTrailerBytes)
          return fail("the chunked trailer is too long");
        if (!whole) return Status::more;
        const Status status = state_ == State::size_line ? take_size_line() : take_trailer_line();
        if (status != Status::more) return status;
        break;
      }
      case State::data: {
        const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, input.size()));
        output.append(input.substr(0, take));
        input.remove_prefix(take);
        remaining_ -= take;
        if (remaining_ == 0) state_ = State::data_end;
        break;
      }
      case State::data_end: {
        if (!collect_line(input, line_)) {
          if (line_.size() > 2) return fail("chunk data must be followed by CRLF");
          return Status::more;
        }
        if (line_ != "\r\n") return fail("chunk data must be followed by CRLF");
        line_.clear();
        state_ = State::size_line;
        break;
      }
      case State::done: return Status::done;
      case State::failed: return Status::malformed;
    }
  }
  return Status::more;
}

}  // namespace kael::serve
