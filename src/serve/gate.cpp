// The gate in front of the routes (gate.hpp).
#include "serve/gate.hpp"

#include <string>

#include "kael/core/error.hpp"
#include "serve/json_text.hpp"

namespace kael::serve {
namespace {

constexpr const char* kAllowedMethods = "GET, POST, OPTIONS";
constexpr const char* kAllowedHeaders = "Authorization, Content-Type";
constexpr const char* kPreflightMaxAge = "600";  // seconds a browser may cache a preflight

Response answer(Response response, int status, std::string_view message, std::string_view type,
                std::string_view code = {}) {
  Json body = error_json(message, type, "", status);
  if (!code.empty()) body["error"]["code"] = code;
  response.status = status;
  response.set_content(dump(body), "application/json");
  return response;
}

// The request's Origin when it comes from another origin than the server's own, else "".
std::string cross_origin(const AccessPolicy& policy, const Request& request) {
  if (!request.has_header("Origin")) return {};
  std::string origin = request.header("Origin");
  if (policy.same_origin(origin, request.header("Host"))) return {};
  if (origin.empty()) origin = "null";  // an empty Origin is still one, and never allowed
  return origin;
}

std::optional<Response> check_phase(const Lifecycle& lifecycle, const Request& request) {
  const Phase phase = lifecycle.phase();
  if (phase == Phase::ready) return std::nullopt;
  if (phase == Phase::draining && request.path == "/metrics") return std::nullopt;  // still scraped
  Response response;
  response.set_header("Retry-After", phase == Phase::loading ? "5" : "1");
  if (request.path == "/health") {
    response.status = 503;
    response.set_content(dump(Json{{"status", phase_name(phase)}}), "application/json");
    return response;
  }
  return answer(std::move(response), 503,
                phase == Phase::loading ? "the model is still loading; retry later"
                                        : "the server is shutting down; retry on another replica",
                "server_error");
}

}  // namespace

std::optional<Response> gate_request(const AccessPolicy& policy, const Lifecycle& lifecycle, const Request& request) {
  // 1. Origin: a browser page of another origin gets nothing unless --cors-origin names it
  //    (the request itself is refused, not only its answer hidden: it would still run).
  const std::string origin = cross_origin(policy, request);
  if (!origin.empty() && !policy.cors_allowed(origin))
    return answer(Response{}, 403,
                  str("cross-origin requests from ", quote_prefix(origin), " are not allowed (see --cors-origin)"),
                  "invalid_request_error", "origin_not_allowed");
  // 2. A preflight carries no credentials: answered before the key check.
  if (request.method == "OPTIONS") {
    Response response;
    response.status = 204;
    response.set_header("Allow", kAllowedMethods);
    if (!origin.empty()) {
      response.set_header("Access-Control-Allow-Methods", kAllowedMethods);
      response.set_header("Access-Control-Allow-Headers", kAllowedHeaders);
      response.set_header("Access-Control-Max-Age", kPreflightMaxAge);
    }
    return response;
  }
  // 3. The key. The message never repeats what was sent.
  const AccessPolicy::Guard guard = policy.guard_for(request.path);
  if (!policy.allows(guard, request.header("Authorization"))) {
    Response response;
    response.set_header("WWW-Authenticate", "Bearer realm=\"kael\"");
    const bool sent = request.has_header("Authorization");
    const char* which = guard == AccessPolicy::Guard::metrics_key ? "metrics key (--metrics-key)" : "API key";
    return answer(std::move(response), 401,
                  sent ? str("the ", which, " is not valid: send Authorization: Bearer KEY")
                       : str("this server needs an ", which, ": send Authorization: Bearer KEY"),
                  "invalid_request_error", "invalid_api_key");
  }
  // 4. Loading or draining.
  return check_phase(lifecycle, request);
}

void add_cors_headers(const AccessPolicy& policy, const Request& request, Response& response) {
  if (policy.cors_origins().empty()) return;
  response.set_header("Vary", "Origin");
  const std::string origin = cross_origin(policy, request);
  if (origin.empty() || !policy.cors_allowed(origin)) return;
  response.set_header("Access-Control-Allow-Origin", origin);
  response.set_header("Access-Control-Expose-Headers", "Retry-After");
}

}  // namespace kael::serve
