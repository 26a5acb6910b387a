// The gate in front of the routes (gate.hpp).
#include "serve/gate.hpp"

#include <string>

#include "kael/core/error.hpp"
#include "serve/http_head.hpp"
#include "serve/json_text.hpp"

namespace kael::serve {
namespace {

using Verdict = httplib::Server::HandlerResponse;

constexpr const char* kAllowedMethods = "GET, POST, OPTIONS";
constexpr const char* kAllowedHeaders = "Authorization, Content-Type";
constexpr const char* kPreflightMaxAge = "600";  // seconds a browser may cache a preflight

Verdict answer(httplib::Response& response, int status, std::string_view message, std::string_view type,
               std::string_view code = {}) {
  Json body = error_json(message, type, "", status);
  if (!code.empty()) body["error"]["code"] = code;
  response.status = status;
  response.set_content(dump(body), "application/json");
  return Verdict::Handled;
}

// The request's Origin when it comes from another origin than the server's own, else "".
std::string cross_origin(const AccessPolicy& policy, const httplib::Request& request) {
  if (!request.has_header("Origin")) return {};
  std::string origin = request.get_header_value("Origin");
  if (policy.same_origin(origin, request.get_header_value("Host"))) return {};
  if (origin.empty()) origin = "null";  // an empty Origin is still one, and never allowed
  return origin;
}

Verdict check_phase(const Lifecycle& lifecycle, const httplib::Request& request, httplib::Response& response) {
  const Phase phase = lifecycle.phase();
  if (phase == Phase::ready) return Verdict::Unhandled;
  if (phase == Phase::draining && request.path == "/metrics") return Verdict::Unhandled;  // still scraped
  response.set_header("Retry-After", phase == Phase::loading ? "5" : "1");
  if (request.path == "/health") {
    response.status = 503;
    response.set_content(dump(Json{{"status", phase_name(phase)}}), "application/json");
    return Verdict::Handled;
  }
  return answer(response, 503,
                phase == Phase::loading ? "the model is still loading; retry later"
                                        : "the server is shutting down; retry on another replica",
                "server_error");
}

}  // namespace

void install_gate(httplib::Server& server, const AccessPolicy& policy, const Lifecycle& lifecycle) {
  server.set_pre_routing_handler([&policy, &lifecycle](const httplib::Request& request, httplib::Response& response) {
    // 1. Origin: a browser page of another origin gets nothing unless --cors-origin names it
    //    (the request itself is refused, not only its answer hidden: it would still run).
    const std::string origin = cross_origin(policy, request);
    if (!origin.empty() && !policy.cors_allowed(origin))
      return answer(response, 403,
                    str("cross-origin requests from ", quote_prefix(origin), " are not allowed (see --cors-origin)"),
                    "invalid_request_error", "origin_not_allowed");
    // 2. A preflight carries no credentials: answered before the key check.
    if (request.method == "OPTIONS") {
      response.status = 204;
      response.set_header("Allow", kAllowedMethods);
      if (!origin.empty()) {
        response.set_header("Access-Control-Allow-Methods", kAllowedMethods);
        response.set_header("Access-Control-Allow-Headers", kAllowedHeaders);
        response.set_header("Access-Control-Max-Age", kPreflightMaxAge);
      }
      return Verdict::Handled;
    }
    // 3. The key. The message never repeats what was sent.
    const AccessPolicy::Guard guard = policy.guard_for(request.path);
    if (!policy.allows(guard, request.get_header_value("Authorization"))) {
      response.set_header("WWW-Authenticate", "Bearer realm=\"kael\"");
      const bool sent = request.has_header("Authorization");
      const char* which = guard == AccessPolicy::Guard::metrics_key ? "metrics key (--metrics-key)" : "API key";
      return answer(response, 401,
                    sent ? str("the ", which, " is not valid: send Authorization: Bearer KEY")
                         : str("this server needs an ", which, ": send Authorization: Bearer KEY"),
                    "invalid_request_error", "invalid_api_key");
    }
    // 4. Loading or draining.
    return check_phase(lifecycle, request, response);
  });

  // Every response (refusals and streams included) to an allowed cross-origin request names
  // that origin, and only it; with origins configured, caches keep answers apart per Origin.
  server.set_post_routing_handler([&policy](const httplib::Request& request, httplib::Response& response) {
    if (policy.cors_origins().empty()) return;
    response.set_header("Vary", "Origin");
    const std::string origin = cross_origin(policy, request);
    if (origin.empty() || !policy.cors_allowed(origin)) return;
    response.set_header("Access-Control-Allow-Origin", origin);
    response.set_header("Access-Control-Expose-Headers", "Retry-After");
  });
}

}  // namespace kael::serve
