// `kael serve`: loads the model and serves the OpenAI-compatible HTTP API until SIGINT/SIGTERM.
#pragma once

#include <cstddef>
#include <string>

namespace kael::serve {

struct ServerOptions {
  std::string model_dir;
  std::string host = "127.0.0.1";  // loopback unless asked: the API has no authentication
  int port = 8080;
  int threads = 0;                 // compute threads; 0 = every core
  int max_batch = 16;
  int max_queue = 64;
  int prefill_chunk = 128;
  double timeout_seconds = 600;    // per request, from arrival (queueing included)
  std::size_t max_body_bytes = 1 << 20;
  int max_connections = 256;       // open HTTP connections; past it, 503 at once
  double head_timeout_seconds = 10;  // a request head must arrive whole within this (408)
  std::string dtype = "f32";
};

// Serves until a signal asks it to stop; returns the process exit code. Error when the model
// cannot be loaded or the address cannot be bound; ValueError for bad options.
int run_server(const ServerOptions& options);

}  // namespace kael::serve
