// `kael serve`: the OpenAI-compatible HTTP server (src/serve/). This file only parses options.
#include <memory>

#include "cli/command.hpp"
#include "cli/default_model.hpp"
#include "serve/server.hpp"

namespace kael::cli {
namespace {

RunFn setup(CLI::App& app) {
  auto options = std::make_shared<serve::ServerOptions>();
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
  cmd->add_option("--drain-timeout", options->drain_timeout_seconds,
                  "Seconds running requests may take to finish after SIGTERM/SIGINT (then they end with 503)")
      ->capture_default_str();
  cmd->add_option("--kv-memory-mb", options->kv_memory_mb,
                  "KV cache memory in MiB; a request waits in the queue until its prompt + max_tokens fit "
                  "(0 = --max-batch full contexts)")
      ->capture_default_str();
  cmd->add_option("--prefix-cache-mb", options->prefix_cache_mb,
                  "MiB of recent prompts' KV blocks kept, within the KV memory, so a prompt sharing their start "
                  "skips its prefill (0 = off)")
      ->capture_default_str();
  return [options] {
    options->model_dir = resolve_model_dir(options->model_dir);
    return serve::run_server(*options);
  };
}

const Registration registration("serve", setup);

}  // namespace
}  // namespace kael::cli
