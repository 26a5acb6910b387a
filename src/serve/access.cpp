// API keys and CORS origins (access.hpp).
#include "serve/access.hpp"

#include <span>
#include <sstream>

#include "kael/core/error.hpp"
#include "kael/core/file.hpp"
#include "kael/io/checksums.hpp"
#include "serve/http_message.hpp"  // iequals, trim

namespace kael::serve {
namespace {

// Keys are kept and compared as SHA-256 digests: every digest has the same length, so comparing
// them says nothing about a key's length.
std::string key_digest(std::string_view key) {
  return io::sha256_hex(std::as_bytes(std::span(key.data(), key.size())));
}

// Equal strings of equal length, in time that does not depend on where they differ.
bool equal_in_constant_time(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;  // digests: the length is public
  unsigned char difference = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    difference |= static_cast<unsigned char>(a[i] ^ b[i]);
  return difference == 0;
}

bool printable_token(std::string_view key) {
  for (const unsigned char c : key)
    if (c < 0x21 || c > 0x7e) return false;
  return !key.empty();
}

// An origin as browsers send it: scheme "://" host [":" port], nothing after.
void check_origin(const std::string& origin) {
  const bool scheme = origin.starts_with("http://") || origin.starts_with("https://");
  const std::size_t host_at = origin.find("://") + 3;
  if (!scheme || origin.size() == host_at || origin.find('/', host_at) != std::string::npos || !printable_token(origin))
    throw ValueError(str("--cors-origin must be an origin such as https://app.example.com (a scheme, a host and an "
                         "optional port; no path, no wildcard), found \"", origin, "\""));
}

}  // namespace

KeySet::KeySet(const std::vector<std::string>& keys, std::string_view option) {
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (!printable_token(keys[i]))
      throw ValueError(str(option, " key ", i + 1, " of ", keys.size(),
                           " is empty or holds a character outside printable ASCII (spaces included)"));
    digests_.push_back(key_digest(keys[i]));
  }
}

bool KeySet::matches(std::string_view token) const {
  const std::string presented = key_digest(token);
  unsigned int found = 0;
  for (const auto& digest : digests_)  // every key, whatever matched before
    found |= static_cast<unsigned int>(equal_in_constant_time(digest, presented));
  return found != 0;
}

std::vector<std::string> read_key_file(const std::string& path) {
  // A FIFO or device is refused at once (never waited on, never read without end).
  constexpr std::uint64_t kMaxKeyFileBytes = 1 << 20;  // thousands of keys
  std::vector<std::string> keys;
  std::istringstream lines(read_regular_file(path, "--api-key-file", kMaxKeyFileBytes));
  for (std::string line; std::getline(lines, line);) {
    const std::string_view key = trim(line);
    if (key.empty() || key.front() == '#') continue;
    keys.emplace_back(key);
  }
  if (keys.empty()) throw ValueError(str("--api-key-file ", path, " holds no key (blank lines and # comments only)"));
  return keys;
}

std::optional<std::string_view> bearer_token(std::string_view authorization) {
  authorization = trim(authorization);
  constexpr std::string_view scheme = "bearer";
  if (authorization.size() <= scheme.size() || !iequals(authorization.substr(0, scheme.size()), scheme) ||
      (authorization[scheme.size()] != ' ' && authorization[scheme.size()] != '\t'))
    return std::nullopt;
  const std::string_view token = trim(authorization.substr(scheme.size()));
  if (token.empty()) return std::nullopt;
  return token;
}

AccessPolicy::AccessPolicy(const AccessOptions& options) : cors_origins_(options.cors_origins) {
  std::vector<std::string> keys = options.api_keys;
  if (!options.api_key_file.empty())
    for (auto& key : read_key_file(options.api_key_file)) keys.push_back(std::move(key));
  api_keys_ = KeySet(keys, keys.size() == options.api_keys.size() ? "--api-key" : "--api-key/--api-key-file");
  if (!options.metrics_key.empty()) metrics_key_ = KeySet({options.metrics_key}, "--metrics-key");
  for (const auto& origin : cors_origins_) check_origin(origin);
}

AccessPolicy::Guard AccessPolicy::guard_for(std::string_view path) const {
  if (path == "/") return Guard::none;  // the page itself; what it fetches is guarded
  if (path == "/health" || path == "/metrics") return metrics_key_.empty() ? Guard::none : Guard::metrics_key;
  return api_keys_.empty() ? Guard::none : Guard::api_key;
}

bool AccessPolicy::allows(Guard guard, std::string_view authorization_header) const {
  if (guard == Guard::none) return true;
  const auto token = bearer_token(authorization_header);
  if (!token) return false;
  return (guard == Guard::api_key ? api_keys_ : metrics_key_).matches(*token);
}

bool AccessPolicy::same_origin(std::string_view origin, std::string_view host) const {
  if (host.empty()) return false;
  for (const std::string_view scheme : {"http://", "https://"})
    if (origin.size() == scheme.size() + host.size() && origin.starts_with(scheme) && iequals(origin.substr(scheme.size()), host))
      return true;
  return false;
}

bool AccessPolicy::cors_allowed(std::string_view origin) const {
  for (const auto& allowed : cors_origins_)
    if (origin == allowed) return true;
  return false;
}

}  // namespace kael::serve
