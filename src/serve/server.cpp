// run_server (server.hpp): wiring, signals, readiness and the drain.
#include "serve/server.hpp"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

#include "kael/core/error.hpp"
#include "kael/model/gpt2.hpp"
#include "kael/text/tokenizer.hpp"
#include "serve/context.hpp"
#include "serve/gate.hpp"
#include "serve/http_front.hpp"
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
  if (!(o.drain_timeout_seconds >= 0.0) || o.drain_timeout_seconds > 3600)
    throw ValueError(str("--drain-timeout must be in [0, 3600] seconds, found ", o.drain_timeout_seconds));
  if (o.kv_memory_mb < 0 || o.kv_memory_mb > (1 << 24))
    throw ValueError(str("--kv-memory-mb must be in [0, 16777216] (0 = --max-batch full contexts), found ",
                         o.kv_memory_mb));
  if (o.prefix_cache_mb < 0 || o.prefix_cache_mb > (1 << 24))
    throw ValueError(str("--prefix-cache-mb must be in [0, 16777216] (0 = off), found ", o.prefix_cache_mb));
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

// The prefix cache's blocks for --prefix-cache-mb (0: off; at least one block otherwise).
std::int64_t prefix_cache_blocks(const ServerOptions& o, const model::GPT2& model) {
  if (o.prefix_cache_mb == 0) return 0;
  const std::int64_t block_bytes = model.new_kv_pool(1)->block_bytes();
  return std::max<std::int64_t>(1, (std::int64_t{o.prefix_cache_mb} << 20) / block_bytes);
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

// The accept loop on its own thread, so the main thread can load the model while /health
// already answers (503, "loading"). Destroying it stops the server and joins every
// connection thread: whatever they use must outlive it, or be stopped first (stop()).
class Listener {
 public:
  Listener(FrontServer& server, pthread_t main_thread) : server_(server) {
    thread_ = std::thread([this, main_thread] {
      server_.listen_after_bind();  // returns when stopped, or when the listening socket fails
      done_.store(true);
      if (!stopping_.load()) pthread_kill(main_thread, SIGTERM);  // it ended by itself: wake the main thread
    });
    // httplib's stop() does nothing before listening has begun: wait for it, so stop() works.
    while (!server_.is_running() && !done_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~Listener() { stop(); }

  void stop() {
    stopping_.store(true);
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  bool ended_by_itself() const { return done_.load() && !stopping_.load(); }

 private:
  FrontServer& server_;
  std::thread thread_;
  std::atomic<bool> stopping_{false}, done_{false};
};

// Waits for the requests being answered to finish, at most `timeout` or until another stop
// signal; returns how many are still running.
int drain(const FrontServer& server, const sigset_t& stop_signals, double timeout_seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  while (server.requests_in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
    const timespec slice{0, 50'000'000};
    if (sigtimedwait(&stop_signals, nullptr, &slice) > 0) {
      std::fprintf(stderr, "kael serve: second stop signal: not waiting any longer\n");
      break;
    }
  }
  return server.requests_in_flight();
}

}  // namespace

int run_server(const ServerOptions& options) {
  validate(options);
  const AccessPolicy access(options.access);  // reads --api-key-file: fails before anything listens

  // SIGINT/SIGTERM are taken by the main thread with sigwait (blocked everywhere, so every
  // thread started below inherits the mask); a write to a closed connection must not kill us.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  if (const std::string warning = model::threads_cap_warning(options.threads); !warning.empty())
    std::fprintf(stderr, "%s\n", warning.c_str());
  model::set_num_threads(options.threads);  // after the mask: its workers inherit it

  // Everything httplib reads is set before it listens; the routes come once the model is loaded.
  Metrics metrics;
  Lifecycle lifecycle;
  HttpLimits http_limits;
  http_limits.max_body_bytes = options.max_body_bytes;
  http_limits.max_connections = options.max_connections;
  http_limits.head_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(options.head_timeout_seconds * 1000));
  http_limits.body_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(options.body_timeout_seconds * 1000));
  FrontServer server(http_limits, [&metrics](int status) { metrics.count_request("other", status); });
  install_gate(server, access, lifecycle);
  register_fallbacks(server, metrics);

  // Port 0: the system picks a free port, printed below.
  const int port = server.bind(options.host, options.port);
  if (port <= 0)
    throw Error(str("cannot listen on ", options.host, ":", options.port, " (address in use or not available)"));
  std::fprintf(stderr, "kael serve: listening on http://%s:%d; loading %s (/health is 503 until it is loaded)\n",
               options.host.c_str(), port, options.model_dir.c_str());
  if (access.api_key_count() > 0 || access.has_metrics_key() || !access.cors_origins().empty())
    std::fprintf(stderr, "kael serve: %zu API keys, %s, %zu CORS origins\n", access.api_key_count(),
                 access.has_metrics_key() ? "a metrics key" : "/health and /metrics open", access.cors_origins().size());
  Listener listener(server, pthread_self());

  const auto tokenizer = text::Tokenizer::from_directory(options.model_dir);
  model::LoadOptions load_options;
  load_options.dtype = model::parse_weight_dtype(options.dtype);
  // Read into the process's own memory, never mapped: once loaded, the server does not depend
  // on the file (it may be truncated, rewritten or deleted while serving).
  load_options.mmap = false;
  const auto model = model::GPT2::load(options.model_dir, load_options);
  const auto& config = model.config();

  Scheduler scheduler(
      model, SchedulerOptions{options.max_batch, options.max_queue, options.prefill_chunk, kv_blocks(options, model),
                              prefix_cache_blocks(options, model)},
      metrics);
  metrics.watch_kv_pool(scheduler.kv_pool());
  std::fprintf(stderr, "kael serve: KV memory %lld blocks of %lld positions, %.1f MiB; prefix cache %lld blocks\n",
               static_cast<long long>(scheduler.kv_pool()->total_blocks()),
               static_cast<long long>(scheduler.kv_pool()->block_positions()),
               static_cast<double>(scheduler.kv_pool()->total_blocks() * scheduler.kv_pool()->block_bytes()) / (1 << 20),
               static_cast<long long>(scheduler.prefix_cache_blocks()));
  ServerContext context{model, tokenizer, scheduler, metrics, RequestLimits{}, model_name(options.model_dir),
                        unix_now(), std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.timeout_seconds)), {}};
  context.limits.n_positions = config.n_positions;
  context.limits.vocab_size =
      std::min<std::int64_t>(config.vocab_size, static_cast<std::int64_t>(tokenizer.vocabulary_size()));
  context.next_seed.store(std::random_device{}());
  register_routes(server, context);
  // Whatever happens next, the connection threads are gone before the context they use.
  struct StopFirst {
    Scheduler& scheduler;
    Listener& listener;
    ~StopFirst() {
      scheduler.stop();  // ends what still runs with 503s, so no handler waits on the model
      listener.stop();
    }
  } stop_first{scheduler, listener};
  lifecycle.set(Phase::ready);
  std::fprintf(stderr, "kael serve: ready: %s (%d layers, %d positions), max batch %d, queue %d, %d threads\n",
               context.model_id.c_str(), config.n_layer, config.n_positions, options.max_batch, options.max_queue,
               model::num_threads());

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  if (listener.ended_by_itself()) {
    std::fprintf(stderr, "kael serve: the listening socket failed\n");
    return 1;
  }
  lifecycle.set(Phase::draining);
  std::fprintf(stderr, "kael serve: %s: draining (new requests get 503; %d running, waiting up to %g s)\n",
               signal_number == SIGINT ? "SIGINT" : "SIGTERM", server.requests_in_flight(), options.drain_timeout_seconds);
  const int unfinished = drain(server, stop_signals, options.drain_timeout_seconds);
  if (unfinished > 0)
    std::fprintf(stderr, "kael serve: drain ended with %d requests still running: they end now with a 503 error "
                 "(a stream gets an error event and [DONE])\n", unfinished);
  else
    std::fprintf(stderr, "kael serve: drained: every running request finished\n");
  scheduler.stop();
  listener.stop();
  std::fprintf(stderr, "kael serve: stopped\n");
  return 0;
}

}  // namespace kael::serve
