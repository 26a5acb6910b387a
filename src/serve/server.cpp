// run_server (server.hpp): wiring, signals and shutdown.
#include "serve/server.hpp"

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

#include "kael/core/error.hpp"
#include "kael/model/gpt2.hpp"
#include "kael/text/tokenizer.hpp"
#include "serve/context.hpp"
#include "serve/http_front.hpp"
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

int run_server(const ServerOptions& options) {
  validate(options);

  // SIGINT/SIGTERM are taken by one thread with sigwait (blocked everywhere else, so every
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

  const auto tokenizer = text::Tokenizer::from_directory(options.model_dir);
  model::LoadOptions load_options;
  load_options.dtype = model::parse_weight_dtype(options.dtype);
  // Read into the process's own memory, never mapped: once loaded, the server does not depend
  // on the file (it may be truncated, rewritten or deleted while serving).
  load_options.mmap = false;
  const auto model = model::GPT2::load(options.model_dir, load_options);
  const auto& config = model.config();

  Metrics metrics;
  Scheduler scheduler(model, SchedulerOptions{options.max_batch, options.max_queue, options.prefill_chunk}, metrics);
  ServerContext context{model, tokenizer, scheduler, metrics, RequestLimits{}, model_name(options.model_dir),
                        unix_now(), std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.timeout_seconds)), {}};
  context.limits.n_positions = config.n_positions;
  context.limits.vocab_size =
      std::min<std::int64_t>(config.vocab_size, static_cast<std::int64_t>(tokenizer.vocabulary_size()));
  context.next_seed.store(std::random_device{}());

  HttpLimits http_limits;
  http_limits.max_body_bytes = options.max_body_bytes;
  http_limits.max_connections = options.max_connections;
  http_limits.head_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(options.head_timeout_seconds * 1000));
  FrontServer server(http_limits, [&metrics](int status) { metrics.count_request("other", status); });
  register_routes(server, context);

  // Port 0: the system picks a free port, printed below.
  const int port = options.port == 0 ? server.bind_to_any_port(options.host)
                                     : (server.bind_to_port(options.host, options.port) ? options.port : -1);
  if (port <= 0)
    throw Error(str("cannot listen on ", options.host, ":", options.port, " (address in use or not available)"));
  std::fprintf(stderr, "kael serve: %s (%d layers, %d positions) on http://%s:%d, max batch %d, queue %d, %d threads\n",
               context.model_id.c_str(), config.n_layer, config.n_positions, options.host.c_str(), port,
               options.max_batch, options.max_queue, model::num_threads());

  std::thread signal_thread([&] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    // Finish the jobs first (with 503s), so no handler is left waiting on the model.
    scheduler.stop();
    server.stop();
  });
  const bool listened = server.listen_after_bind();
  if (signal_thread.joinable()) {
    pthread_kill(signal_thread.native_handle(), SIGTERM);  // wakes it if listen ended by itself
    signal_thread.join();
  }
  scheduler.stop();
  std::fprintf(stderr, "kael serve: stopped\n");
  return listened ? 0 : 1;
}

}  // namespace kael::serve
