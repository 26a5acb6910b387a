// Who may use `kael serve`: API keys (Authorization: Bearer) and the browser origins allowed
// cross-origin access (CORS). The rules are in docs/behaviour.md ("Server access"); gate.hpp
// applies them to every request.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kael/serve/server.hpp"  // AccessOptions

namespace kael::serve {

// A set of secrets compared in constant time: each is kept only as its SHA-256 digest, and a
// presented token is hashed and compared with every digest, all 64 hex digits each, without an
// early exit, so neither the time nor the branch taken tells how much of a key matched or
// which key it was, nor a key's length.
class KeySet {
 public:
  KeySet() = default;
  // ValueError when a key is empty or has a byte outside printable ASCII (0x21-0x7e), the
  // characters a Bearer token may hold; the message never quotes the key.
  explicit KeySet(const std::vector<std::string>& keys, std::string_view option);

  bool empty() const { return digests_.empty(); }
  std::size_t size() const { return digests_.size(); }
  bool matches(std::string_view token) const;

 private:
  std::vector<std::string> digests_;  // SHA-256 of each key, hex
};

// The keys of an --api-key-file: one a line; surrounding spaces and tabs are trimmed, and
// blank lines and lines starting with '#' are skipped. Error when the file cannot be read, is
// not a regular file, is larger than 1 MiB, or holds no key (an empty file would silently leave the server open).
std::vector<std::string> read_key_file(const std::string& path);

// The token of an `Authorization: Bearer TOKEN` header value ("Bearer" case-insensitive), or
// nullopt when the value is not of that form.
std::optional<std::string_view> bearer_token(std::string_view authorization);

class AccessPolicy {
 public:
  AccessPolicy() = default;
  // Reads the key file and checks every key and origin (ValueError, Error for the file).
  explicit AccessPolicy(const AccessOptions& options);

  // The paths a key guards: every route but the page at "/" and the probes (/health,
  // /metrics) need an API key when keys are set; the probes need the metrics key when it is.
  enum class Guard { none, api_key, metrics_key };
  Guard guard_for(std::string_view path) const;
  bool allows(Guard guard, std::string_view authorization_header) const;

  // An Origin header is allowed when it is the server's own origin (the page at "/" posts
  // with one) or exactly one of --cors-origin's; no wildcard, and "null" never.
  bool same_origin(std::string_view origin, std::string_view host) const;
  bool cors_allowed(std::string_view origin) const;

  std::size_t api_key_count() const { return api_keys_.size(); }
  bool has_metrics_key() const { return !metrics_key_.empty(); }
  const std::vector<std::string>& cors_origins() const { return cors_origins_; }

 private:
  KeySet api_keys_;
  KeySet metrics_key_;
  std::vector<std::string> cors_origins_;
};

}  // namespace kael::serve
