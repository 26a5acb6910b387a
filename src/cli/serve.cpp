// `kael serve`: the OpenAI-compatible HTTP server (kael/serve/server.hpp) until SIGINT or
// SIGTERM, then a drain: new requests get 503 while running ones finish, for at most
// --drain-timeout (a second signal ends it at once).
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "cli/command.hpp"
#include "cli/default_model.hpp"
#include "kael/core/error.hpp"
#include "kael/model/gpt2.hpp"
#include "kael/serve/server.hpp"

namespace kael::cli {
namespace {

struct ServeOptions {
  serve::ServerOptions server;
  double drain_timeout_seconds = 30;  // after SIGTERM/SIGINT, running requests may finish within this
};

void log_line(const std::string& line) { std::fprintf(stderr, "kael serve: %s\n", line.c_str()); }

// Each open connection takes a descriptor: raise the soft limit toward the hard one when
// --max-connections needs more (as nginx's worker_rlimit_nofile does).
void raise_descriptor_limit(int max_connections) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t wanted = static_cast<rlim_t>(max_connections) + 256;  // model files, logs, the refused
  if (limit.rlim_cur >= wanted) return;
  limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? wanted : std::min(wanted, limit.rlim_max);
  setrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur < wanted)
    log_line(str("warning: --max-connections ", max_connections, " needs about ", wanted,
                 " open files, but the limit is ", limit.rlim_cur, " (ulimit -n); connections past it wait"));
}

// Waits for the requests being answered to finish, at most `timeout` or until another stop
// signal; returns how many still run.
int drain(const serve::Server& server, const sigset_t& stop_signals, double timeout_seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  while (server.requests_in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
    const timespec slice{0, 50'000'000};
    if (sigtimedwait(&stop_signals, nullptr, &slice) > 0) {
      log_line("second stop signal: not waiting any longer");
      break;
    }
  }
  return server.requests_in_flight();
}

int run(ServeOptions& options) {
  if (!(options.drain_timeout_seconds >= 0.0) || options.drain_timeout_seconds > 3600)
    throw ValueError(str("--drain-timeout must be in [0, 3600] seconds, found ", options.drain_timeout_seconds));
  // SIGINT/SIGTERM are taken here with sigwait (blocked everywhere, so every thread started
  // below inherits the mask); a write to a closed connection must not kill the process.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  if (const std::string warning = model::threads_cap_warning(options.server.threads); !warning.empty())
    std::fprintf(stderr, "%s\n", warning.c_str());
  model::set_num_threads(options.server.threads);  // after the mask: its workers inherit it
  raise_descriptor_limit(options.server.max_connections);

  options.server.log = log_line;
  serve::Server server(options.server);
  server.load();

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  server.begin_drain();
  log_line(str(signal_number == SIGINT ? "SIGINT" : "SIGTERM", ": draining (new requests get 503; ",
               server.requests_in_flight(), " running, waiting up to ", options.drain_timeout_seconds, " s)"));
  const int unfinished = drain(server, stop_signals, options.drain_timeout_seconds);
  if (unfinished > 0)
    log_line(str("drain ended with ", unfinished, " requests still running: they end now with a 503 error "
                 "(a stream gets an error event and [DONE])"));
  else
    log_line("drained: every running request finished");
  server.stop();
  log_line("stopped");
  return 0;
}

RunFn setup(CLI::App& app) {
  auto serve_options = std::make_shared<ServeOptions>();
  serve::ServerOptions* options = &serve_options->server;
  CLI::App* cmd = app.add_subcommand(
      "serve", "Serve the model over HTTP: OpenAI /v1/completions (streaming), /tokenize, /metrics, a page at /");
  cmd->add_option("--model", options->model_dir, kModelHelp);
  cmd->add_option("--host", options->host, "Address to listen on (loopback by default; see --api-key before opening it)")
      ->capture_default_str();
  cmd->add_option("--port", options->port, "TCP port")->capture_default_str();
  cmd->add_option("--threads", options->threads, "Compute threads (0 = every core)")->capture_default_str();
  cmd->add_option("--max-batch", options->max_batch, "Requests decoded together")->capture_default_str();
  cmd->add_option("--max-queue", options->max_queue, "Requests waiting for a batch slot before 503s")
      ->capture_default_str();
  cmd->add_option("--prefill-chunk", options->prefill_chunk,
                  "Prompt tokens prefilled per scheduler step (long prompts are split so others keep decoding)")
      ->capture_default_str();
  cmd->add_option("--timeout", options->timeout_seconds, "Seconds a request may take, queueing included")
      ->capture_default_str();
  cmd->add_option("--max-body", options->max_body_bytes, "Largest request body in bytes (larger: 413)")
      ->capture_default_str();
  cmd->add_option("--max-connections", options->max_connections,
                  "Open HTTP connections served at once (one more: 503 at once)")
      ->capture_default_str();
  cmd->add_option("--head-timeout", options->head_timeout_seconds,
                  "Seconds a request head may take to arrive, whole (slower: 408)")
      ->capture_default_str();
  cmd->add_option("--body-timeout", options->body_timeout_seconds,
                  "Seconds a request body may take to arrive, whole, after its head (slower: 408)")
      ->capture_default_str();
  cmd->add_option("--dtype", options->dtype, kDtypeHelp)->capture_default_str();
  cmd->add_option("--api-key", options->access.api_keys,
                  "A key clients must send as Authorization: Bearer KEY for /v1/*, /tokenize, /detokenize "
                  "(repeatable; visible in ps: prefer --api-key-file)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--api-key-file", options->access.api_key_file,
                  "File of API keys, one a line (blank lines and lines starting with # are skipped)");
  cmd->add_option("--metrics-key", options->access.metrics_key,
                  "A key /health and /metrics then require (Authorization: Bearer KEY); open without it");
  cmd->add_option("--cors-origin", options->access.cors_origins,
                  "A browser origin allowed cross-origin access, exactly (e.g. https://app.example.com; repeatable; "
                  "none by default)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--keep-alive-timeout", options->keep_alive_timeout_seconds,
                  "Seconds an idle kept-alive connection stays open waiting for its next request")
      ->capture_default_str();
  cmd->add_option("--drain-timeout", serve_options->drain_timeout_seconds,
                  "Seconds running requests may take to finish after SIGTERM/SIGINT (then they end with 503)")
      ->capture_default_str();
  cmd->add_option("--kv-memory-mb", options->kv_memory_mb,
                  "KV cache memory in MiB; a request waits in the queue until its prompt + max_tokens fit "
                  "(0 = --max-batch full contexts)")
      ->capture_default_str();
  cmd->add_option("--prefix-cache-mb", options->prefix_cache_mb,
                  "MiB of recent prompts' KV blocks kept, within the KV memory, so a prompt sharing their start "
                  "skips its prefill (0 = off; default: half of the KV memory)");
  return [serve_options] {
    serve_options->server.model_dir = resolve_model_dir(serve_options->server.model_dir);
    return run(*serve_options);
  };
}

const Registration registration("serve", setup);

}  // namespace
}  // namespace kael::cli
