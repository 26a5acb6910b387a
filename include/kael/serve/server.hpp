// The OpenAI-compatible HTTP server (`kael serve`) as a library: start one on a model, drain
// it, stop it. /v1/completions (whole or streamed as Server-Sent Events), /v1/models,
// /tokenize, /detokenize, /health, /metrics and a page at /; requests are batched by a
// continuous-batching scheduler. The HTTP rules (limits, access, drain) are in docs/server.md.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kael::serve {

struct AccessOptions {
  std::vector<std::string> api_keys;      // --api-key, repeatable
  std::string api_key_file;               // --api-key-file
  std::string metrics_key;                // --metrics-key: guards /health and /metrics
  std::vector<std::string> cors_origins;  // --cors-origin, repeatable: exact origins allowed
};

struct ServerOptions {
  std::string model_dir;
  std::string host = "127.0.0.1";  // loopback unless asked
  int port = 8080;                 // 0: a free port (Server::port() tells which)
  int threads = 0;                 // compute threads; 0 = every core
  int max_batch = 16;
  int max_queue = 64;
  int prefill_chunk = 128;
  double timeout_seconds = 600;    // per request, from arrival (queueing included)
  std::size_t max_body_bytes = 1 << 20;
  int max_connections = 256;       // open HTTP connections; past it, 503 at once
  double head_timeout_seconds = 10;  // a request head must arrive whole within this (408)
  double body_timeout_seconds = 30;  // a request body must arrive whole within this, from the head's end (408)
  double keep_alive_timeout_seconds = 5;  // an idle kept-alive connection is closed after this
  std::string dtype = "f32";
  AccessOptions access;            // API keys, metrics key, CORS origins
  int kv_memory_mb = 0;            // KV cache memory (MiB); 0 = --max-batch full contexts
  // Blocks of recent prompts kept (MiB, within the KV memory; cached blocks nobody holds are
  // free for new requests); 0 = off; nullopt = half of the KV memory.
  std::optional<int> prefix_cache_mb;
  // Progress lines (listening, loaded, ready); none when empty. Called on the caller's thread.
  std::function<void(const std::string&)> log;
};

class Server {
 public:
  // Validates the options (ValueError), reads the key file (Error), binds and listens (Error:
  // address in use) and answers at once: /health is 503 "loading" until load() returns.
  explicit Server(const ServerOptions& options);
  ~Server();  // stop()s
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const;

  // Loads the tokenizer and model into memory (never mapped: the files may change while it
  // serves), starts the scheduler and serves. Error when the model cannot be loaded.
  void load();

  // Stops admitting: new requests and /health get 503 ("draining"), running ones go on.
  void begin_drain();
  // Requests read whole and not yet answered whole (streams included): what a drain waits for.
  int requests_in_flight() const;

  // Ends what still runs with a 503 (a stream gets an error event and [DONE]), closes every
  // connection and joins the threads. Idempotent.
  void stop();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kael::serve
