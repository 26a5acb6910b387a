// The HTTP routes (routes.hpp). Each runs inside `guarded`, which turns every exception into
// an OpenAI-style JSON error, so no input can take the server down.
#include "serve/routes.hpp"

#include <exception>
#include <string>

#include "kael/core/error.hpp"
#include "kael/model/gpt2.hpp"
#include "serve/completions.hpp"
#include "serve/gate.hpp"
#include "serve/http_error.hpp"
#include "serve/json_text.hpp"
#include "serve/page.hpp"

namespace kael::serve {
namespace {

Response error_response(int status, std::string_view message, std::string_view type, std::string_view param = {}) {
  Response response;
  response.status = status;
  response.set_content(dump(error_json(message, type, param, status)), "application/json");
  return response;
}

Response json_response(const Json& body) {
  Response response;
  response.set_content(dump(body), "application/json");
  return response;
}

// Runs a route, turning every exception into its JSON error; an HttpError keeps the headers
// the route had set (a 503's Retry-After).
template <typename Route>
Response guarded(Route&& route) {
  try {
    return route();
  } catch (const HttpError& e) {
    Response response = error_response(e.status(), e.what(), e.type(), e.param());
    if (e.status() == 503) response.set_header("Retry-After", "1");
    return response;
  } catch (const ValueError& e) {  // a request the library refused: a bad value, dtype or id
    return error_response(400, e.what(), "invalid_request_error");
  } catch (const TypeError& e) {
    return error_response(400, e.what(), "invalid_request_error");
  } catch (const IndexError& e) {
    return error_response(400, e.what(), "invalid_request_error");
  } catch (const std::bad_alloc&) {
    return error_response(503, "out of memory", "server_error");
  } catch (const std::exception& e) {
    return error_response(500, std::string("internal error: ") + e.what(), "server_error");
  }
}

}  // namespace

std::string route_label(const std::string& path) {
  for (const char* known : {"/", "/v1/completions", "/v1/models", "/health", "/metrics", "/tokenize", "/detokenize"})
    if (path == known) return known;
  return "other";
}

Response Router::handle(Request& request) const {
  std::optional<Response> refused = gate_request(policy_, lifecycle_, request);
  ServerContext* context = context_.load(std::memory_order_acquire);
  Response response = refused    ? std::move(*refused)
                      : !context ? error_response(503, "the model is still loading; retry later", "server_error")
                                 : guarded([&] { return route(*context, request); });
  add_cors_headers(policy_, request, response);
  return response;
}

Response Router::route(ServerContext& context, Request& request) const {
  const std::string& path = request.path;
  const bool get = request.method == "GET" || request.method == "HEAD";  // HEAD: the connection drops the body
  const bool post = request.method == "POST";
  if (post && path == "/v1/completions") return handle_completion(context, request.body);

  if (get && path == "/v1/models") {
    const Json model = {{"id", context.model_id}, {"object", "model"}, {"created", context.started},
                        {"owned_by", "kael"}, {"context_length", context.limits.n_positions}};
    return json_response({{"object", "list"}, {"data", Json::array({model})}});
  }

  if (get && path == "/health")
    return json_response({{"status", "ok"},
                          {"model", context.model_id},
                          {"active", context.scheduler.active_count()},
                          {"queued", context.scheduler.queue_depth()},
                          {"max_batch", context.scheduler.options().max_batch},
                          {"isa", kael::model::kernel_isa()},
                          {"int8_dot", kael::model::int8_dot()}});

  if (get && path == "/metrics") {
    Response response;
    response.set_content(context.metrics.render(context.scheduler.queue_depth(), context.scheduler.active_count(),
                                                context.scheduler.options().max_batch),
                         "text/plain; version=0.0.4");
    return response;
  }

  if (post && path == "/tokenize") {
    const TokenizeRequest parsed = parse_tokenize_request(request.body, context.limits);
    const auto ids = context.tokenizer.encode(parsed.text, parsed.allow_special);
    return json_response({{"ids", ids}, {"count", ids.size()}});
  }

  if (post && path == "/detokenize") {
    const auto ids = parse_detokenize_request(request.body, context.limits.vocab_size);
    const std::string text = context.tokenizer.decode(ids);
    Json bytes = Json::array();
    for (const unsigned char c : text) bytes.push_back(c);
    // "text" replaces invalid UTF-8 with U+FFFD; "bytes" is exact.
    return json_response({{"text", text}, {"bytes", std::move(bytes)}});
  }

  if (get && path == "/") {
    Response response;
    response.set_content(std::string(playground_page()), "text/html; charset=utf-8");
    return response;
  }

  return error_response(404, str("no route for ", request.method, " ", path), "invalid_request_error");
}

}  // namespace kael::serve
