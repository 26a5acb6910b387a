// `kael serve`: loads the model and serves the OpenAI-compatible HTTP API until SIGINT/SIGTERM.
#pragma once

#include <cstddef>
#include <string>

#include "serve/access.hpp"

namespace kael::serve {

struct ServerOptions {
  std::string model_dir;
  std::string host = "127.0.0.1";  // loopback unless asked
  int port = 8080;
  int threads = 0;                 // compute threads; 0 = every core
  int max_batch = 16;
  int max_queue = 64;
  int prefill_chunk = 128;
  double timeout_seconds = 600;    // per request, from arrival (queueing included)
  std::size_t max_body_bytes = 1 << 20;
  int max_connections = 256;       // open HTTP connections; past it, 503 at once
  double head_timeout_seconds = 10;  // a request head must arrive whole within this (408)
  double body_timeout_seconds = 30;  // a request body must arrive whole within this, from the head's end (408)
  std::string dtype = "f32";
  AccessOptions access;            // API keys, metrics key, CORS origins
  double drain_timeout_seconds = 30;  // after SIGTERM/SIGINT, running requests may finish within this
  int kv_memory_mb = 0;  // KV cache memory (MiB); 0 = --max-batch full contexts
  int prefix_cache_mb = 0;  // blocks of recent prompts kept (MiB, within the KV memory); 0 = off
};

// Binds, then loads the model (/health answers 503 meanwhile), serves until SIGTERM or SIGINT,
// then drains: new requests get 503 while running ones finish, for at most the drain timeout
// (a second signal ends it at once); returns the process exit code (0 after a signal). Error
// when the model or a key file cannot be loaded or the address cannot be bound; ValueError for
// bad options.
int run_server(const ServerOptions& options);

}  // namespace kael::serve
