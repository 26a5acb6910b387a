// Chunked transfer coding (RFC 9112 section 7.1), decoded incrementally: bytes arrive in
// pieces of any size, and the decoder hands out data as soon as it has it, so a caller can
// enforce a size limit while a body is still arriving. One decoder serves both request
// bodies and the rewrite of a chunked response for an HTTP/1.0 client.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kael::serve {

class ChunkedDecoder {
 public:
  enum class Status { more, done, malformed };

  // Consumes bytes from the front of `input` (all of it unless the body ends inside it; what
  // follows the body stays in `input`) and appends the decoded data to `output`.
  Status feed(std::string_view& input, std::string& output);
  // Why the input was malformed (after Status::malformed).
  const std::string& error() const { return error_; }

 private:
  enum class State { size_line, data, data_end, trailer, done, failed };
  Status fail(std::string message);
  Status take_size_line();
  Status take_trailer_line();

  State state_ = State::size_line;
  std::string line_;            // the line being collected (size or trailer)
  std::uint64_t remaining_ = 0; // data bytes left in the current chunk
  std::size_t trailer_bytes_ = 0;
  std::string error_;
};

}  // namespace kael::serve
