// POST /v1/completions (completions.hpp).
#include "serve/completions.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>

#include "kael/core/error.hpp"
#include "kael/generate/prompt_logprobs.hpp"
#include "serve/beam_completion.hpp"
#include "serve/choices.hpp"
#include "serve/completion_format.hpp"
#include "serve/http_error.hpp"
#include "serve/sse.hpp"

namespace kael::serve {
namespace {

std::string completion_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "cmpl-%016llx", static_cast<unsigned long long>(rng()));
  return buffer;
}

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

using Jobs = std::vector<std::shared_ptr<Job>>;

void cancel_all(const Jobs& jobs) {
  for (const auto& job : jobs) job->cancel();
}

// True when a stop string ended the text; <|endoftext|> (unless ignored) also finishes with
// "stop", but its token is not text and nothing is cut.
bool cut_by_stop_string(const JobOutcome& outcome, const CompletionRequest& request, std::int32_t last_id) {
  return outcome.finish_reason == FinishReason::stop && !(last_id == text::kEndOfText && !request.options.ignore_eos);
}

Json outcome_error(const JobOutcome& outcome) {
  return error_json(outcome.error_message, outcome.error_type, "", outcome.error_status);
}

// Text offsets count from the start of the prompt, whether or not it is echoed.
LogprobsBuilder make_logprobs(const ServerContext& context, const CompletionRequest& request) {
  return LogprobsBuilder(context.tokenizer, request.echo ? 0 : char_count(request.prompt_text));
}

// The echoed prompt's logprobs entries: the first token has none (nothing precedes it), the
// others their scores, as OpenAI gives them.
void add_echoed_prompt(LogprobsBuilder& builder, const CompletionRequest& request,
                       const std::vector<TokenEvent>& prompt_scores) {
  builder.add_prompt_token(request.prompt_ids[0]);
  for (const auto& event : prompt_scores) builder.add_prompt_token(event);
}

// What a choice ranks by when best_of > n: the mean log-probability of its tokens.
double mean_logprob(const std::vector<TokenEvent>& events) {
  if (events.empty()) return 0.0;
  double sum = 0.0;
  for (const auto& e : events) sum += e.logprob;
  return sum / static_cast<double>(events.size());
}

void subscribe_all(const Jobs& jobs, const std::function<void()>& wake) {
  for (const auto& job : jobs) job->on_change(wake);
}

// A completion answered whole: once every candidate finished, the n best as choices (or the
// first error).
class WholeAnswer final : public Producer {
 public:
  WholeAnswer(const ServerContext& context, Jobs jobs, CompletionHeader header, std::vector<TokenEvent> prompt_scores)
      : context_(context), jobs_(std::move(jobs)), header_(std::move(header)), prompt_scores_(std::move(prompt_scores)),
        events_(jobs_.size()), outcomes_(jobs_.size()) {}

  void subscribe(std::function<void()> wake) override { subscribe_all(jobs_, wake); }
  void cancel() override { cancel_all(jobs_); }

  bool poll(Response& out) override {
    for (std::size_t i = 0; i < jobs_.size(); ++i) {
      if (outcomes_[i]) continue;
      outcomes_[i] = jobs_[i]->take(events_[i]);
      if (outcomes_[i] && outcomes_[i]->error_status != 0) {
        cancel_all(jobs_);
        out.status = outcomes_[i]->error_status;
        out.set_content(dump(outcome_error(*outcomes_[i])), "application/json");
        return true;
      }
    }
    if (!std::all_of(outcomes_.begin(), outcomes_.end(), [](const auto& o) { return o.has_value(); })) return false;
    out.set_content(dump(join_choices(choices())), "application/json");
    return true;
  }

 private:
  std::vector<Json> choices() const {
    const CompletionRequest& request = jobs_.front()->request();
    // OpenAI's usage counts the prompt once and the tokens of every candidate.
    int completion_tokens = 0;
    for (const auto& o : outcomes_) completion_tokens += o->completion_tokens;
    std::vector<std::size_t> order(jobs_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    if (request.best_of > request.n)
      std::stable_sort(order.begin(), order.end(),
                       [&](std::size_t a, std::size_t b) { return mean_logprob(events_[a]) > mean_logprob(events_[b]); });
    order.resize(static_cast<std::size_t>(request.n));

    std::vector<Json> completions;
    for (std::size_t index = 0; index < order.size(); ++index) {
      const std::size_t c = order[index];
      std::string text = request.echo ? request.prompt_text : std::string();
      Json logprobs = nullptr;
      if (request.return_logprobs) {
        LogprobsBuilder builder = make_logprobs(context_, request);
        if (request.echo) add_echoed_prompt(builder, request, prompt_scores_);
        for (const auto& event : events_[c]) {
          builder.add(event);
          builder.cover(event.text.size());
        }
        builder.finish(cut_by_stop_string(*outcomes_[c], request, builder.last_id()));
        logprobs = builder.take();
      }
      for (const auto& event : events_[c]) text += event.text;
      completions.push_back(completion_object(header_, text, std::move(logprobs),
                                              std::string(finish_reason_name(outcomes_[c]->finish_reason)),
                                              index == 0 ? usage_json(outcomes_[c]->prompt_tokens, completion_tokens)
                                                         : Json()));
    }
    return completions;
  }

  const ServerContext& context_;
  Jobs jobs_;
  CompletionHeader header_;
  std::vector<TokenEvent> prompt_scores_;
  std::vector<std::vector<TokenEvent>> events_;
  std::vector<std::optional<JobOutcome>> outcomes_;
};

// A streamed completion: its events as SSE chunks (each names its choice's index) as they
// come, then [DONE]. With several choices, each ends with its own finish_reason chunk and the
// usage comes last in a chunk with no choices, as OpenAI streams them.
class EventStream final : public Producer {
 public:
  EventStream(const ServerContext& context, Jobs jobs, CompletionHeader header, std::vector<TokenEvent> prompt_scores)
      : jobs_(std::move(jobs)), header_(std::move(header)), prompt_scores_(std::move(prompt_scores)) {
    for (std::size_t i = 0; i < jobs_.size(); ++i) logprobs_.push_back(make_logprobs(context, jobs_[i]->request()));
    outcomes_.resize(jobs_.size());
  }

  void subscribe(std::function<void()> wake) override { subscribe_all(jobs_, wake); }
  void cancel() override { cancel_all(jobs_); }

  bool poll(Response& out) override {
    std::string& body = out.body;
    const CompletionRequest& request = jobs_.front()->request();
    if (!started_) {
      started_ = true;
      if (request.echo)
        for (std::size_t i = 0; i < jobs_.size(); ++i) {
          if (request.return_logprobs) add_echoed_prompt(logprobs_[i], request, prompt_scores_);
          write_chunk(body, i, request.prompt_text, nullptr);
        }
    }
    for (std::size_t i = 0; i < jobs_.size(); ++i) {
      if (outcomes_[i]) continue;
      events_.clear();
      outcomes_[i] = jobs_[i]->take(events_);
      for (const auto& event : events_) {
        if (request.return_logprobs) {
          logprobs_[i].add(event);
          logprobs_[i].cover(event.text.size());
        }
        // Tokens whose text is held back (half a character, a possible stop string) ride
        // along with the next chunk that has text.
        if (!event.text.empty()) write_chunk(body, i, event.text, nullptr);
      }
      if (!outcomes_[i]) continue;
      if (outcomes_[i]->error_status != 0) {
        cancel_all(jobs_);
        body += sse_event(dump(outcome_error(*outcomes_[i])));
        body += kSseDone;
        return true;
      }
      if (request.return_logprobs)
        logprobs_[i].finish(cut_by_stop_string(*outcomes_[i], request, logprobs_[i].last_id()));
      completion_tokens_ += outcomes_[i]->completion_tokens;
      const bool last = std::all_of(outcomes_.begin(), outcomes_.end(), [](const auto& o) { return o.has_value(); });
      Json usage = request.include_usage && last && jobs_.size() == 1 ? this_usage() : Json();
      write_chunk(body, i, "", std::string(finish_reason_name(outcomes_[i]->finish_reason)), std::move(usage));
      if (last) {
        if (jobs_.size() > 1 && request.include_usage) {
          Json tail = completion_object(header_, "", nullptr, nullptr, this_usage());
          tail["choices"] = Json::array();
          body += sse_event(dump(tail));
        }
        body += kSseDone;
        return true;
      }
    }
    return false;
  }

 private:
  Json this_usage() const { return usage_json(static_cast<int>(jobs_.front()->request().prompt_ids.size()), completion_tokens_); }

  void write_chunk(std::string& body, std::size_t index, std::string_view text, Json finish_reason,
                   Json usage = nullptr) {
    Json logprobs = nullptr;
    if (jobs_.front()->request().return_logprobs) logprobs = logprobs_[index].take();
    Json chunk = completion_object(header_, text, std::move(logprobs), std::move(finish_reason), std::move(usage));
    chunk["choices"][0]["index"] = index;
    body += sse_event(dump(chunk));
  }

  Jobs jobs_;
  CompletionHeader header_;
  std::vector<TokenEvent> prompt_scores_;
  std::vector<LogprobsBuilder> logprobs_;
  std::vector<std::optional<JobOutcome>> outcomes_;
  std::vector<TokenEvent> events_;
  int completion_tokens_ = 0;
  bool started_ = false;
};

// The echoed prompt's scores (echo with logprobs), computed on the worker thread with
// its own KV cache: a forward pass over the prompt that keeps every position's logits.
std::vector<TokenEvent> prompt_scores(const ServerContext& context, const CompletionRequest& request) {
  std::vector<TokenEvent> out;
  if (!(request.echo && request.return_logprobs)) return out;
  for (auto& score : generate::score_prompt(context.model, request.prompt_ids, request.options.top_logprobs))
    out.push_back(TokenEvent{-1, score.logprob, std::move(score.top), {}});
  for (std::size_t i = 0; i < out.size(); ++i) out[i].id = request.prompt_ids[i + 1];
  return out;
}

}  // namespace

Response handle_completion(ServerContext& context, const std::string& body) {
  const std::uint64_t seed = context.next_seed.fetch_add(1, std::memory_order_relaxed);
  CompletionRequest request = parse_completion_request(body, context.tokenizer, context.limits, seed);
  CompletionHeader header{completion_id(), unix_now(), request.model.empty() ? context.model_id : request.model};
  const bool stream = request.stream;
  if (request.use_beam_search) return answer_beam_search(context, request, header);
  std::vector<TokenEvent> scores = prompt_scores(context, request);
  // best_of candidates, candidate i sampled with seed + i. Each Sequence is built here, not on
  // the scheduler thread, so its own checks fail as a 400 before anything is queued or streamed.
  Jobs jobs;
  const Clock::time_point deadline = Clock::now() + context.timeout;  // one for every candidate
  for (int i = 0; i < request.best_of; ++i) {
    CompletionRequest one = request;
    one.options.sampling.seed = request.options.sampling.seed + static_cast<std::uint64_t>(i);
    generate::Sequence sequence(context.tokenizer, one.prompt_ids, one.options, context.model.config().n_positions);
    jobs.push_back(std::make_shared<Job>(std::move(one), std::move(sequence), deadline));
  }

  for (const auto& job : jobs) {
    const auto admission = context.scheduler.submit(job);
    if (admission == Scheduler::Admission::accepted) continue;
    cancel_all(jobs);  // the ones already queued end at the scheduler's next look
    if (admission == Scheduler::Admission::never_fits) {  // a 4xx: no retry, here or elsewhere, can help
      const auto& pool = *context.scheduler.kv_pool();
      throw HttpError(400, str("the request needs ", context.scheduler.blocks_needed(*job), " KV blocks of ",
                               pool.block_positions(), " positions (prompt + max_tokens) but the server's KV memory "
                               "holds ", pool.total_blocks(), "; lower max_tokens or shorten the prompt"),
                      "max_tokens");
    }
    if (admission == Scheduler::Admission::queue_full) {
      context.metrics.count_rejected();
      throw HttpError(503, str("the server is busy: ", context.scheduler.options().max_batch, " running and ",
                               context.scheduler.queue_depth(), " queued requests; retry later"),
                      "", "server_error");
    }
    throw HttpError(503, "the server is shutting down", "", "server_error");
  }

  Response response;
  if (!stream) {
    response.producer = std::make_shared<WholeAnswer>(context, std::move(jobs), std::move(header), std::move(scores));
    return response;
  }
  response.producer = std::make_shared<EventStream>(context, std::move(jobs), std::move(header), std::move(scores));
  response.streamed = true;
  response.content_type = "text/event-stream";
  response.set_header("Cache-Control", "no-cache");
  response.set_header("X-Accel-Buffering", "no");  // proxies: do not buffer the stream
  return response;
}

}  // namespace kael::serve
