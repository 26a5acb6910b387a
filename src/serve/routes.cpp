// The HTTP routes (routes.hpp). Each handler runs inside `guarded`, which turns every
// exception into an OpenAI-style JSON error, so no input can take the server down.
#include "serve/routes.hpp"

#include <exception>
#include <functional>
#include <string>

#include "kael/core/error.hpp"
#include "kael/model/gpt2.hpp"
#include "serve/completions.hpp"
#include "serve/http_error.hpp"
#include "serve/json_text.hpp"
#include "serve/page.hpp"

namespace kael::serve {
namespace {

using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

void send_error(httplib::Response& response, int status, std::string_view message, std::string_view type,
                std::string_view param = {}) {
  response.status = status;
  response.set_content(dump(error_json(message, type, param, status)), "application/json");
}

Handler guarded(Handler handler) {
  return [handler = std::move(handler)](const httplib::Request& request, httplib::Response& response) {
    try {
      handler(request, response);
    } catch (const HttpError& e) {
      send_error(response, e.status(), e.what(), e.type(), e.param());
    } catch (const ValueError& e) {  // a request the library refused: a bad value, dtype or id
      send_error(response, 400, e.what(), "invalid_request_error");
    } catch (const TypeError& e) {
      send_error(response, 400, e.what(), "invalid_request_error");
    } catch (const IndexError& e) {
      send_error(response, 400, e.what(), "invalid_request_error");
    } catch (const std::bad_alloc&) {
      send_error(response, 503, "out of memory", "server_error");
    } catch (const std::exception& e) {
      send_error(response, 500, std::string("internal error: ") + e.what(), "server_error");
    }
  };
}

void send_json(httplib::Response& response, const Json& body) { response.set_content(dump(body), "application/json"); }

// Metric label for a path: the known routes, or "other" (an unbounded label set would let
// clients grow the metrics without limit).
std::string route_label(const std::string& path) {
  for (const char* known : {"/", "/v1/completions", "/v1/models", "/health", "/metrics", "/tokenize", "/detokenize"})
    if (path == known) return known;
  return "other";
}

std::string reason_for(int status) {
  switch (status) {
    case 400: return "bad request";
    case 404: return "not found";
    case 405: return "method not allowed";
    case 413: return "the request body is too large (limit: --max-body bytes for JSON; httplib caps form-encoded bodies at 8 KiB, so send Content-Type: application/json)";
    case 414: return "the request URI is too long";
    default: return "HTTP error";
  }
}

}  // namespace

void register_routes(httplib::Server& server, ServerContext& context) {
  server.Post("/v1/completions", guarded([&context](const httplib::Request& request, httplib::Response& response) {
    handle_completion(context, request, response);
  }));

  server.Get("/v1/models", guarded([&context](const httplib::Request&, httplib::Response& response) {
    const Json model = {{"id", context.model_id}, {"object", "model"}, {"created", context.started},
                        {"owned_by", "kael"}, {"context_length", context.limits.n_positions}};
    send_json(response, {{"object", "list"}, {"data", Json::array({model})}});
  }));

  server.Get("/health", guarded([&context](const httplib::Request&, httplib::Response& response) {
    send_json(response, {{"status", "ok"},
                         {"model", context.model_id},
                         {"active", context.scheduler.active_count()},
                         {"queued", context.scheduler.queue_depth()},
                         {"max_batch", context.scheduler.options().max_batch},
                         {"isa", kael::model::kernel_isa()},
                         {"int8_dot", kael::model::int8_dot()}});
  }));

  server.Get("/metrics", guarded([&context](const httplib::Request&, httplib::Response& response) {
    response.set_content(context.metrics.render(context.scheduler.queue_depth(), context.scheduler.active_count(),
                                                context.scheduler.options().max_batch),
                         "text/plain; version=0.0.4");
  }));

  server.Post("/tokenize", guarded([&context](const httplib::Request& request, httplib::Response& response) {
    const TokenizeRequest parsed = parse_tokenize_request(request.body, context.limits);
    const auto ids = context.tokenizer.encode(parsed.text, parsed.allow_special);
    send_json(response, {{"ids", ids}, {"count", ids.size()}});
  }));

  server.Post("/detokenize", guarded([&context](const httplib::Request& request, httplib::Response& response) {
    const auto ids = parse_detokenize_request(request.body, context.limits.vocab_size);
    const std::string text = context.tokenizer.decode(ids);
    Json bytes = Json::array();
    for (const unsigned char c : text) bytes.push_back(c);
    // "text" replaces invalid UTF-8 with U+FFFD; "bytes" is exact.
    send_json(response, {{"text", text}, {"bytes", std::move(bytes)}});
  }));

  server.Get("/", [](const httplib::Request&, httplib::Response& response) {
    response.set_content(std::string(playground_page()), "text/html; charset=utf-8");
  });
}

void register_fallbacks(httplib::Server& server, Metrics& metrics) {
  // Errors httplib answers itself (no route: 404; body over the limit: 413; a bad request
  // line: 400) get the same JSON shape as ours. Our own errors already have a body.
  server.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& request,
                                                                  httplib::Response& response) {
    if (!response.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const std::string message = response.status == 404 ? "no route for " + request.method + " " + request.path
                                                        : reason_for(response.status);
    send_error(response, response.status, message, "invalid_request_error");
    return httplib::Server::HandlerResponse::Handled;
  }));

  // Last resort for anything thrown outside `guarded` (httplib's own code paths).
  server.set_exception_handler([](const httplib::Request&, httplib::Response& response, std::exception_ptr) {
    send_error(response, 500, "internal error", "server_error");
  });

  server.set_logger([&metrics](const httplib::Request& request, const httplib::Response& response) {
    metrics.count_request(route_label(request.path), response.status);
  });
}

}  // namespace kael::serve
