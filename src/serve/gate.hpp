// What every request passes before its route: the CORS origin check and preflight, the API
// key, and the server's phase (loading, draining), checked before routing; and the CORS
// headers every response to an allowed origin carries. The rules are in docs/behaviour.md
// ("Server access").
#pragma once

#include <optional>

#include "serve/access.hpp"
#include "serve/http_message.hpp"
#include "serve/lifecycle.hpp"

namespace kael::serve {

// The answer to a request the gate stops (403, 401, 503, or a preflight's 204); nullopt when
// the request goes on to its route.
std::optional<Response> gate_request(const AccessPolicy& policy, const Lifecycle& lifecycle, const Request& request);

// Names the origin of an allowed cross-origin request in its response (refusals and streams
// included), and with origins configured, tells caches to keep answers apart per Origin.
void add_cors_headers(const AccessPolicy& policy, const Request& request, Response& response);

}  // namespace kael::serve
