// Server (kael/serve/server.hpp): the options checked, the parts wired, readiness and stop.
#include "kael/serve/server.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>

#include "kael/core/error.hpp"
#include "kael/model/gpt2.hpp"
#include "kael/text/tokenizer.hpp"
#include "serve/context.hpp"
#include "serve/access.hpp"
#include "serve/http_server.hpp"
#include "serve/lifecycle.hpp"
#include "serve/routes.hpp"
#include "serve/scheduler.hpp"

namespace kael::serve {
namespace {

void validate(const ServerOptions& o) {
  model::parse_weight_dtype(o.dtype);  // ValueError listing the choices
  if (o.port < 0 || o.port > 65535) throw ValueError(str("--port must be in [0, 65535], found ", o.port));
  if (o.threads < 0) throw ValueError(str("--threads must be >= 0 (0 = every core), found ", o.threads));
  if (o.max_batch < 1 || o.max_batch > 1024) throw ValueError(str("--max-batch must be in [1, 1024], found ", o.max_batch));
  if (o.max_queue < 0 || o.max_queue > 4096) throw ValueError(str("--max-queue must be in [0, 4096], found ", o.max_queue));
  if (o.prefill_chunk < 1) throw ValueError(str("--prefill-chunk must be >= 1, found ", o.prefill_chunk));
  if (!(o.timeout_seconds > 0.0) || o.timeout_seconds > 1e6)
    throw ValueError(str("--timeout must be in (0, 1e6] seconds, found ", o.timeout_seconds));
  if (o.max_body_bytes < 1024) throw ValueError(str("--max-body must be >= 1024 bytes, found ", o.max_body_bytes));
  if (o.max_connections < 1 || o.max_connections > 65536)
    throw ValueError(str("--max-connections must be in [1, 65536], found ", o.max_connections));
  if (!(o.head_timeout_seconds >= 0.1) || o.head_timeout_seconds > 3600)
    throw ValueError(str("--head-timeout must be in [0.1, 3600] seconds, found ", o.head_timeout_seconds));
  if (!(o.body_timeout_seconds >= 0.1) || o.body_timeout_seconds > 3600)
    throw ValueError(str("--body-timeout must be in [0.1, 3600] seconds, found ", o.body_timeout_seconds));
  if (!(o.keep_alive_timeout_seconds >= 0.1) || o.keep_alive_timeout_seconds > 86400)
    throw ValueError(str("--keep-alive-timeout must be in [0.1, 86400] seconds, found ", o.keep_alive_timeout_seconds));
  if (o.kv_memory_mb < 0 || o.kv_memory_mb > (1 << 24))
    throw ValueError(str("--kv-memory-mb must be in [0, 16777216] (0 = --max-batch full contexts), found ",
                         o.kv_memory_mb));
  if (o.prefix_cache_mb && (*o.prefix_cache_mb < 0 || *o.prefix_cache_mb > (1 << 24)))
    throw ValueError(str("--prefix-cache-mb must be in [0, 16777216] (0 = off), found ", *o.prefix_cache_mb));
}

// The KV pool's blocks for --kv-memory-mb (0: the scheduler's default). ValueError when the
// memory holds not even one block.
std::int64_t kv_blocks(const ServerOptions& o, const model::GPT2& model) {
  if (o.kv_memory_mb == 0) return 0;
  const std::int64_t block_bytes = model.new_kv_pool(1)->block_bytes();
  const std::int64_t blocks = (std::int64_t{o.kv_memory_mb} << 20) / block_bytes;
  if (blocks < 1)
    throw ValueError(str("--kv-memory-mb ", o.kv_memory_mb, " holds no KV block: one block (",
                         model::KvPool::kBlockPositions, " positions) takes ", block_bytes, " bytes"));
  return blocks;
}

// The prefix cache's blocks for --prefix-cache-mb (0: off; at least one block otherwise;
// unset: the scheduler's default share of the pool).
std::int64_t prefix_cache_blocks(const ServerOptions& o, const model::GPT2& model) {
  if (!o.prefix_cache_mb) return SchedulerOptions::kDefaultPrefixCache;
  if (*o.prefix_cache_mb == 0) return 0;
  const std::int64_t block_bytes = model.new_kv_pool(1)->block_bytes();
  return std::max<std::int64_t>(1, (std::int64_t{*o.prefix_cache_mb} << 20) / block_bytes);
}

std::chrono::milliseconds milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

std::string fixed1(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", value);
  return buffer;
}

std::string model_name(const std::string& dir) {
  auto path = std::filesystem::path(dir).lexically_normal();
  if (path.filename().empty()) path = path.parent_path();
  const std::string name = path.filename().string();
  return name.empty() || name == "." ? "gpt2" : name;
}

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

struct Server::State {
  explicit State(const ServerOptions& o) : options(o), access(o.access), router(access, lifecycle) {}

  void log(const std::string& line) const {
    if (options.log) options.log(line);
  }

  const ServerOptions options;
  Metrics metrics;
  Lifecycle lifecycle;
  const AccessPolicy access;  // reads --api-key-file: fails before anything listens
  Router router;
  std::optional<text::Tokenizer> tokenizer;
  std::optional<model::GPT2> model;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<ServerContext> context;
  std::unique_ptr<HttpServer> http;  // last: stopped and destroyed before what its handlers use
  int port = 0;
};

Server::Server(const ServerOptions& options) {
  validate(options);
  state_ = std::make_unique<State>(options);
  State& s = *state_;
  HttpLimits limits;
  limits.max_body_bytes = options.max_body_bytes;
  limits.max_connections = options.max_connections;
  limits.head_timeout = milliseconds(options.head_timeout_seconds);
  limits.body_timeout = milliseconds(options.body_timeout_seconds);
  limits.idle_timeout = milliseconds(options.keep_alive_timeout_seconds);
  // Workers parse requests, tokenize and run beam searches; a completion's waiting holds none.
  const int workers = std::max(4, options.max_batch);
  s.http = std::make_unique<HttpServer>(
      limits, workers, [&s](Request& request) { return s.router.handle(request); },
      [&s](const std::string& path, int status) { s.metrics.count_request(route_label(path), status); });
  s.port = s.http->listen(options.host, options.port);
  s.log(str("listening on http://", options.host, ":", s.port, "; loading ", options.model_dir,
            " (/health is 503 until it is loaded)"));
  if (s.access.api_key_count() > 0 || s.access.has_metrics_key() || !s.access.cors_origins().empty())
    s.log(str(s.access.api_key_count(), " API keys, ",
              s.access.has_metrics_key() ? "a metrics key" : "/health and /metrics open", ", ",
              s.access.cors_origins().size(), " CORS origins"));
}

Server::~Server() { stop(); }

int Server::port() const { return state_->port; }

void Server::load() {
  State& s = *state_;
  const ServerOptions& options = s.options;
  s.tokenizer.emplace(text::Tokenizer::from_directory(options.model_dir));
  model::LoadOptions load_options;
  load_options.dtype = model::parse_weight_dtype(options.dtype);
  // Read into the process's own memory, never mapped: once loaded, the server does not depend
  // on the file (it may be truncated, rewritten or deleted while serving).
  load_options.mmap = false;
  s.model.emplace(model::GPT2::load(options.model_dir, load_options));
  const auto& model = *s.model;
  const auto& config = model.config();

  const std::int64_t pool_blocks = kv_blocks(options, model);
  s.scheduler = std::make_unique<Scheduler>(
      model,
      SchedulerOptions{options.max_batch, options.max_queue, options.prefill_chunk, pool_blocks,
                       prefix_cache_blocks(options, model)},
      s.metrics);
  const auto& pool = *s.scheduler->kv_pool();
  s.metrics.watch_kv_pool(s.scheduler->kv_pool());
  const auto mib = [&](std::int64_t blocks) { return static_cast<double>(blocks * pool.block_bytes()) / (1 << 20); };
  s.log(str("KV memory ", pool.total_blocks(), " blocks of ", pool.block_positions(), " positions, ",
            fixed1(mib(pool.total_blocks())), " MiB; prefix cache ", s.scheduler->prefix_cache_blocks(), " blocks, ",
            fixed1(mib(s.scheduler->prefix_cache_blocks())), " MiB"));
  s.context.reset(new ServerContext{
      model, *s.tokenizer, *s.scheduler, s.metrics, RequestLimits{}, model_name(options.model_dir), unix_now(),
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.timeout_seconds)), {}});
  auto& context = *s.context;
  context.limits.n_positions = config.n_positions;
  context.limits.vocab_size =
      std::min<std::int64_t>(config.vocab_size, static_cast<std::int64_t>(s.tokenizer->vocabulary_size()));
  context.next_seed.store(std::random_device{}());
  s.router.serve(context);
  s.lifecycle.set(Phase::ready);
  s.log(str("ready: ", context.model_id, " (", config.n_layer, " layers, ", config.n_positions, " positions), max batch ",
            options.max_batch, ", queue ", options.max_queue, ", ", model::num_threads(), " threads"));
}

void Server::begin_drain() { state_->lifecycle.set(Phase::draining); }

int Server::requests_in_flight() const { return state_->http->requests_in_flight(); }

void Server::stop() {
  if (!state_) return;
  if (state_->scheduler) state_->scheduler->stop();  // ends what still runs with 503s
  state_->http->stop();
}

}  // namespace kael::serve
