// What every request passes before its route: the CORS origin check and preflight, the API
// key, and the server's phase (loading, draining). Installed as httplib's pre-routing handler
// (which answers refusals itself) and post-routing handler (which adds the CORS headers to
// every response to an allowed origin). The rules are in docs/behaviour.md ("Server access").
#pragma once

#include "serve/access.hpp"
#include "serve/http.hpp"
#include "serve/lifecycle.hpp"

namespace kael::serve {

// Both must outlive `server`. Call before listening: httplib reads its handlers unguarded.
void install_gate(httplib::Server& server, const AccessPolicy& policy, const Lifecycle& lifecycle);

}  // namespace kael::serve
