// POST /v1/completions: validates the request and queues it on the scheduler; the answer is
// produced as the scheduler's events arrive, whole or streamed as Server-Sent Events.
#pragma once

#include "serve/context.hpp"
#include "serve/http_message.hpp"

namespace kael::serve {

// Throws HttpError for a bad request (400) or a full queue (503); otherwise the response's
// producer completes it (beam search alone is answered at once: it runs on this thread).
Response handle_completion(ServerContext& context, const std::string& body);

}  // namespace kael::serve
