// Every HTTP route of `kael serve`, and the JSON errors for what matches none.
#pragma once

#include "serve/context.hpp"
#include "serve/http.hpp"

namespace kael::serve {

// Registers the routes on `server`; `context` must outlive it.
void register_routes(httplib::Server& server, ServerContext& context);

}  // namespace kael::serve
