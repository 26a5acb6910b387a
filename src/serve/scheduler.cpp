// The continuous-batching loop (scheduler.hpp).
#include "serve/scheduler.hpp"

#include <algorithm>
#include <exception>
#include <optional>

#include "kael/core/error.hpp"

namespace kael::serve {
namespace {

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

JobOutcome failure(int status, std::string type, std::string message) {
  return {.finish_reason = FinishReason::error,
          .error_status = status,
          .error_type = std::move(type),
          .error_message = std::move(message)};
}

int prompt_tokens(generate::Sequence& sequence) { return static_cast<int>(sequence.prompt_ids().size()); }

// How a sequence that finished by itself (or was cancelled) ended.
JobOutcome ended(generate::Sequence& sequence) {
  return {.finish_reason = finish_reason_from(sequence.finish_reason()),
          .prompt_tokens = prompt_tokens(sequence),
          .completion_tokens = static_cast<int>(sequence.ids().size())};
}

// Positions a job's sequence may reach: its prompt and max_tokens, within the context. From the
// request, which is constant (submit() reads it on an HTTP thread).
std::int64_t positions_needed(const Job& job, int n_positions) {
  const auto wanted = static_cast<std::int64_t>(job.request().prompt_ids.size()) + job.request().options.max_new_tokens;
  return std::min<std::int64_t>(wanted, n_positions);
}

}  // namespace

Scheduler::Scheduler(const model::GPT2& model, const SchedulerOptions& options, Metrics& metrics)
    : model_(model), options_(options), metrics_(metrics) {
  if (options_.max_batch < 1) throw ValueError(str("max_batch must be >= 1, found ", options_.max_batch));
  if (options_.max_queue < 0) throw ValueError(str("max_queue must be >= 0, found ", options_.max_queue));
  if (options_.prefill_chunk < 1) throw ValueError(str("prefill_chunk must be >= 1, found ", options_.prefill_chunk));
  if (options_.kv_blocks < 0) throw ValueError(str("kv_blocks must be >= 0, found ", options_.kv_blocks));
  if (options_.prefix_cache_blocks < 0 && options_.prefix_cache_blocks != SchedulerOptions::kDefaultPrefixCache)
    throw ValueError(str("prefix_cache_blocks must be >= 0, found ", options_.prefix_cache_blocks));
  const std::int64_t full_context =
      (model_.config().n_positions + model::KvPool::kBlockPositions - 1) / model::KvPool::kBlockPositions;
  pool_ = model_.new_kv_pool(options_.kv_blocks > 0 ? options_.kv_blocks : options_.max_batch * full_context);
  // Cached blocks are pool blocks kept after their request ended: never more than the pool has.
  prefix_cache_blocks_ = options_.prefix_cache_blocks == SchedulerOptions::kDefaultPrefixCache
                             ? std::max<std::int64_t>(1, pool_->total_blocks() / 2)
                             : std::min(options_.prefix_cache_blocks, pool_->total_blocks());
  pool_->set_prefix_cache_blocks(prefix_cache_blocks_);
  thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() { stop(); }

std::int64_t Scheduler::blocks_needed(const Job& job) const {
  return pool_->blocks_for(positions_needed(job, model_.config().n_positions));
}

Scheduler::Admission Scheduler::submit(std::shared_ptr<Job> job) {
  if (blocks_needed(*job) > pool_->total_blocks()) return Admission::never_fits;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return Admission::shutting_down;
    queue_.push_back(std::move(job));
    if (waiting_locked() > static_cast<std::size_t>(options_.max_queue)) {
      queue_.pop_back();
      return Admission::queue_full;
    }
  }
  wake_.notify_one();
  return Admission::accepted;
}

// The queued jobs the next admission would not start: it takes them in order while a batch
// slot is free and the pool has the blocks of each (the prefix cache may lower a job's need;
// counting without it never lets more wait than the bound). admit() changes the pool, the
// queue and the running count under mutex_, so this sees them agree.
std::size_t Scheduler::waiting_locked() const {
  std::int64_t slots = options_.max_batch - active_count();
  std::int64_t blocks = pool_->free_blocks();
  std::size_t startable = 0;
  for (const auto& job : queue_) {
    const std::int64_t need = blocks_needed(*job);
    if (slots <= 0 || need > blocks) break;
    --slots;
    blocks -= need;
    ++startable;
  }
  return queue_.size() - startable;
}

void Scheduler::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

int Scheduler::queue_depth() const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(queue_.size());
}

void Scheduler::run() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      // Idle: sleep until there is work. Otherwise never block, the batch is waiting.
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !active_.empty(); });
      if (stopping_) break;
    }
    try {
      admit();
      drop_cancelled_and_expired();
      prefill();
      decode();
    } catch (const std::exception& e) {
      // Nothing above should throw (per-job errors are caught where they happen); if
      // something does, fail the batch rather than take the server down.
      for (auto& slot : active_)
        if (!slot.job->sequence().finished()) fail(slot, 500, "server_error", str("internal error: ", e.what()));
    }
    release_finished();
  }
  // Shutting down: nobody will run these.
  std::deque<std::shared_ptr<Job>> queued;
  {
    std::lock_guard lock(mutex_);
    queued.swap(queue_);
  }
  for (auto& job : queued) job->finish(failure(503, "server_error", "the server is shutting down"));
  for (auto& slot : active_)
    if (!slot.job->sequence().finished()) fail(slot, 503, "server_error", "the server is shutting down");
  active_.clear();
  active_count_.store(0);
}

model::Session Scheduler::take_session() {
  if (spare_sessions_.empty()) return model_.new_session(pool_);
  model::Session session = std::move(spare_sessions_.back());
  spare_sessions_.pop_back();
  session.reset();
  return session;
}

void Scheduler::admit() {
  sweep_queue();
  while (active_.size() < static_cast<std::size_t>(options_.max_batch)) {
    std::shared_ptr<Job> job;
    {
      std::lock_guard lock(mutex_);
      if (queue_.empty()) return;
      job = queue_.front();  // only this thread takes jobs off the queue
    }
    const auto pop = [&] {
      std::lock_guard lock(mutex_);
      queue_.pop_front();
    };
    const std::int64_t positions = positions_needed(*job, model_.config().n_positions);
    std::optional<model::Session> session;
    try {
      session = take_session();
    } catch (const std::exception& e) {  // no memory for another session: refuse this one
      pop();
      metrics_.count_finished(FinishReason::error);
      job->finish(failure(503, "server_error", str("cannot start the request: ", e.what())));
      continue;
    }
    const auto& prompt = job->sequence().prompt_ids();
    int reused = 0;
    bool reserved = false;
    std::string error;
    {
      // Blocks taken, the job off the queue and the running count move together, so submit()
      // never counts a job's blocks twice nor a slot that is already taken.
      std::lock_guard lock(mutex_);
      try {
        reused = session->attach_prefix(prompt);  // positions already computed
        reserved = session->reserve(static_cast<int>(positions));
      } catch (const std::exception& e) {  // the system is out of memory for a new block
        error = e.what();
      }
      if (reserved) {
        queue_.pop_front();
        active_.push_back(Slot{std::move(job), std::move(*session), static_cast<std::size_t>(reused)});
        active_count_.store(static_cast<int>(active_.size()), std::memory_order_relaxed);
      } else {
        session->reset();
        if (!error.empty()) queue_.pop_front();
      }
    }
    if (!reserved) {
      spare_sessions_.push_back(std::move(*session));
      if (error.empty()) return;  // the KV memory is taken: the job waits at the head of the queue
      metrics_.count_finished(FinishReason::error);
      job->finish(failure(503, "server_error", str("cannot start the request: ", error)));
      continue;
    }
    if (prefix_cache_blocks_ > 0) metrics_.count_prefix_lookup(reused);
    Slot& added = active_.back();
    if (added.job->sequence().finished())  // max_tokens = 0: nothing to run
      end(added, ended(added.job->sequence()));
  }
}

// Ends queued jobs whose client left or whose deadline passed, so a full batch does not keep
// them waiting (and counting against the queue) for nothing.
void Scheduler::sweep_queue() {
  const auto now = Clock::now();
  std::vector<std::shared_ptr<Job>> dropped;
  {
    std::lock_guard lock(mutex_);
    std::erase_if(queue_, [&](const std::shared_ptr<Job>& job) {
      const bool drop = job->cancelled() || now >= job->deadline();
      if (drop) dropped.push_back(job);
      return drop;
    });
  }
  // What the queue waits for: a slot while the batch is full, else the KV memory its head needs.
  const bool batch_full = active_.size() >= static_cast<std::size_t>(options_.max_batch);
  for (auto& job : dropped) {
    // The deadline first: when one choice of a request times out, its client cancels the
    // others, which timed out all the same.
    if (now >= job->deadline())
      time_out(*job, str("the request timed out after ", seconds_since(job->created()), " s waiting for ",
                         batch_full ? "a batch slot" : "KV memory (running requests hold the blocks it needs)"));
    else {
      metrics_.count_finished(FinishReason::cancelled);
      job->finish({.finish_reason = FinishReason::cancelled, .prompt_tokens = prompt_tokens(job->sequence())});
    }
  }
}

// A timed-out request: counted as such, its duration observed like any other's, and a 504.
void Scheduler::time_out(Job& job, std::string message) {
  metrics_.count_finished(FinishReason::timeout);
  metrics_.observe_request(seconds_since(job.created()));
  job.finish(failure(504, "timeout", std::move(message)));
}

void Scheduler::drop_cancelled_and_expired() {
  const auto now = Clock::now();
  for (auto& slot : active_) {
    auto& sequence = slot.job->sequence();
    if (sequence.finished()) continue;
    if (now >= slot.job->deadline()) {  // before the cancel flag: see sweep_queue
      sequence.cancel();
      time_out(*slot.job, str("the request timed out after ", seconds_since(slot.job->created()), " s with ",
                              sequence.ids().size(), " tokens generated"));
    } else if (slot.job->cancelled()) {
      sequence.cancel();
      end(slot, ended(sequence));
    }
  }
}

// Spends this iteration's prefill budget, shortest remaining prompt first: a short prompt
// gets its first token within one iteration even while a long one is being prefilled, and the
// long one still advances whenever the short ones leave budget over.
void Scheduler::prefill() {
  std::vector<Slot*> waiting;
  for (auto& slot : active_) {
    const auto& sequence = slot.job->sequence();
    if (!sequence.finished() && slot.prefilled < sequence.prompt_ids().size()) waiting.push_back(&slot);
  }
  const auto remaining = [](const Slot* slot) { return slot->job->sequence().prompt_ids().size() - slot->prefilled; };
  std::stable_sort(waiting.begin(), waiting.end(),
                   [&](const Slot* a, const Slot* b) { return remaining(a) < remaining(b); });

  std::size_t budget = static_cast<std::size_t>(options_.prefill_chunk);
  for (Slot* slot : waiting) {
    if (budget == 0) return;
    auto& sequence = slot->job->sequence();
    const std::size_t n = std::min(budget, remaining(slot));
    try {
      const auto chunk = sequence.pending().subspan(slot->prefilled, n);
      const auto logits = model_.forward(slot->session, chunk);
      slot->prefilled += n;
      budget -= n;
      metrics_.count_prompt_tokens(static_cast<std::int64_t>(n));
      if (remaining(slot) == 0) {
        slot->session.publish_prefix(sequence.prompt_ids());  // for later prompts that start alike
        accept(*slot, logits);  // the prompt's last logits give token 1
      }
    } catch (const std::exception& e) {
      fail(*slot, 500, "server_error", str("prefill failed: ", e.what()));
    }
  }
}

void Scheduler::decode() {
  std::vector<Slot*> batch;
  std::vector<model::Session*> sessions;
  std::vector<std::int32_t> tokens;
  for (auto& slot : active_) {
    const auto& sequence = slot.job->sequence();
    if (sequence.finished() || slot.prefilled < sequence.prompt_ids().size() || slot.first_token) continue;
    batch.push_back(&slot);
    sessions.push_back(&slot.session);
    tokens.push_back(sequence.pending()[0]);
  }
  if (batch.empty()) return;
  const auto start = Clock::now();
  std::vector<std::span<const float>> logits;
  try {
    logits = model_.forward_batch(sessions, tokens);
  } catch (const std::exception& e) {
    for (Slot* slot : batch) fail(*slot, 500, "server_error", str("decode failed: ", e.what()));
    return;
  }
  metrics_.observe_batch(static_cast<int>(batch.size()), seconds_since(start));
  for (std::size_t i = 0; i < batch.size(); ++i) {
    try {
      accept(*batch[i], logits[i]);
    } catch (const std::exception& e) {
      fail(*batch[i], 500, "server_error", str("sampling failed: ", e.what()));
    }
  }
}

// Chooses the next token from `logits`, hands it to the job and ends the job when done.
void Scheduler::accept(Slot& slot, std::span<const float> logits) {
  auto& sequence = slot.job->sequence();
  generate::Step step = sequence.accept(logits);
  if (slot.first_token) {
    metrics_.observe_time_to_first_token(seconds_since(slot.job->created()));
    slot.first_token = false;
  }
  metrics_.count_generated_tokens(1);
  slot.job->push(TokenEvent{step.token, step.logprob, std::move(step.top_logprobs), std::move(step.text)});
  if (step.finished)
    end(slot, ended(sequence));
}

void Scheduler::end(Slot& slot, JobOutcome outcome) {
  metrics_.count_finished(outcome.finish_reason);
  metrics_.observe_request(seconds_since(slot.job->created()));
  slot.job->finish(std::move(outcome));
}

void Scheduler::fail(Slot& slot, int status, std::string type, std::string message) {
  auto& sequence = slot.job->sequence();
  try {
    if (!sequence.finished()) sequence.cancel();  // marks it finished so its slot is freed
  } catch (const std::exception&) {
    // Only the held-back text was being computed; the job fails either way.
  }
  metrics_.count_finished(FinishReason::error);
  slot.job->finish(failure(status, std::move(type), std::move(message)));
}

// Frees the slots of finished sequences (their KV caches go back to the spare list).
void Scheduler::release_finished() {
  std::vector<Slot> kept;
  kept.reserve(active_.size());
  for (auto& slot : active_) {
    if (slot.job->sequence().finished()) {
      slot.session.reset();  // its KV blocks go back to the pool now
      spare_sessions_.push_back(std::move(slot.session));
    }
    else
      kept.push_back(std::move(slot));
  }
  active_ = std::move(kept);
  active_count_.store(static_cast<int>(active_.size()), std::memory_order_relaxed);
  // Keep at most one batch worth of caches: memory returns to the system after a burst.
  if (spare_sessions_.size() > static_cast<std::size_t>(options_.max_batch))
    spare_sessions_.erase(spare_sessions_.begin() + options_.max_batch, spare_sessions_.end());
}

}  // namespace kael::serve
