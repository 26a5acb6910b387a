// POST /v1/completions: validates the request, queues it on the scheduler, then either waits
// for the whole completion or streams it as Server-Sent Events.
#pragma once

#include "serve/context.hpp"
#include "serve/http.hpp"

namespace kael::serve {

// Throws HttpError for a bad request (400) or a full queue (503); answers everything else.
void handle_completion(ServerContext& context, const httplib::Request& request, httplib::Response& response);

}  // namespace kael::serve
