// POST /v1/completions with "use_beam_search": true, answered whole.
#pragma once

#include "serve/completion_format.hpp"
#include "serve/context.hpp"
#include "serve/http_message.hpp"
#include "serve/request.hpp"

namespace kael::serve {

// Runs the beams on the worker thread that answers the request (they share one batched
// forward step per token, serialized with the scheduler's decode steps) and answers the n best
// as choices 0 .. n-1.
Response answer_beam_search(ServerContext& context, const CompletionRequest& request, const CompletionHeader& header);

}  // namespace kael::serve
