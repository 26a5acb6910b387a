// Every HTTP route of `kael serve`, and the JSON errors for what matches none.
#pragma once

#include "serve/context.hpp"
#include "serve/http.hpp"

namespace kael::serve {

// Registers the routes on `server`; `context` must outlive it. May be called while the server
// listens only if no request reaches routing until it returns (the gate holds them while loading).
void register_routes(httplib::Server& server, ServerContext& context);

// The JSON errors for what no route answers, the last-resort exception handler, and the request
// counter; `metrics` must outlive `server`. Before listening: httplib reads them unguarded.
void register_fallbacks(httplib::Server& server, Metrics& metrics);

}  // namespace kael::serve
