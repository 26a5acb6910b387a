// The one error hierarchy of kael (docs/behaviour.md, "Errors"). Library code throws these and
// never prints or exits; only the command line's main turns them into "error: <message>".
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace kael {

// Base class: I/O failures and missing things (a file that cannot be opened, a tensor not found).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A bad value or a malformed file.
class ValueError : public Error {
 public:
  using Error::Error;
};

// A wrong or unsupported dtype.
class TypeError : public Error {
 public:
  using Error::Error;
};

// An id or index out of range.
class IndexError : public Error {
 public:
  using Error::Error;
};

// Concatenates any streamable values into one string: str("expected ", n, " found ", m).
template <class... Args>
std::string str(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

// Overflow-checked arithmetic on sizes: false when the exact result does not fit.
inline bool checked_mul(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
  return !__builtin_mul_overflow(a, b, &out);
}
inline bool checked_add(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
  return !__builtin_add_overflow(a, b, &out);
}

}  // namespace kael
