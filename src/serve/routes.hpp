// Every HTTP route of `kael serve` behind the gate, and the JSON errors for what matches none.
#pragma once

#include <atomic>

#include "serve/access.hpp"
#include "serve/context.hpp"
#include "serve/http_message.hpp"
#include "serve/lifecycle.hpp"

namespace kael::serve {

class Router {
 public:
  // Both must outlive the router.
  Router(const AccessPolicy& policy, const Lifecycle& lifecycle) : policy_(policy), lifecycle_(lifecycle) {}

  // The routes answer once the model is loaded: set the context before the lifecycle says
  // ready (until then the gate answers 503). `context` must outlive the router's use.
  void serve(ServerContext& context) { context_.store(&context, std::memory_order_release); }

  // Answers one request (on a worker thread); every exception becomes an OpenAI-style error.
  Response handle(Request& request) const;

 private:
  Response route(ServerContext& context, Request& request) const;

  const AccessPolicy& policy_;
  const Lifecycle& lifecycle_;
  std::atomic<ServerContext*> context_{nullptr};
};

// The metric label of a path: a known route, or "other" (an unbounded label set would let
// clients grow the metrics without limit).
std::string route_label(const std::string& path);

}  // namespace kael::serve
