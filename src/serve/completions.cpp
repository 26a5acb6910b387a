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

// How often a waiting handler looks at its client's connection.
constexpr std::chrono::milliseconds kPollInterval{100};

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

void answer_whole(ServerContext& context, const Jobs& jobs, const CompletionHeader& header,
                  const std::vector<TokenEvent>& prompt_scores, const ConnectionWatch& client,
                  httplib::Response& response) {
  const CompletionRequest& request = jobs.front()->request();
  std::vector<std::vector<TokenEvent>> events(jobs.size());
  std::vector<JobOutcome> outcomes;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    std::optional<JobOutcome> outcome;
    while (!(outcome = jobs[i]->wait(events[i], kPollInterval))) {
      // The scheduler ends a cancelled job at its next step; the loop then sees the outcome.
      if (client.closed()) cancel_all(jobs);
    }
    if (outcome->error_status != 0) {
      cancel_all(jobs);
      response.status = outcome->error_status;
      response.set_content(dump(outcome_error(*outcome)), "application/json");
      return;
    }
    outcomes.push_back(std::move(*outcome));
  }
  // OpenAI's usage counts the prompt once and the tokens of every candidate.
  int completion_tokens = 0;
  for (const auto& o : outcomes) completion_tokens += o.completion_tokens;
  std::vector<std::size_t> order(jobs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (request.best_of > request.n)
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return mean_logprob(events[a]) > mean_logprob(events[b]); });
  order.resize(static_cast<std::size_t>(request.n));

  std::vector<Json> completions;
  for (std::size_t index = 0; index < order.size(); ++index) {
    const std::size_t c = order[index];
    std::string text = request.echo ? request.prompt_text : std::string();
    Json logprobs = nullptr;
    if (request.return_logprobs) {
      LogprobsBuilder builder = make_logprobs(context, request);
      if (request.echo) add_echoed_prompt(builder, request, prompt_scores);
      for (const auto& event : events[c]) {
        builder.add(event);
        builder.cover(event.text.size());
      }
      builder.finish(cut_by_stop_string(outcomes[c], request, builder.last_id()));
      logprobs = builder.take();
    }
    for (const auto& event : events[c]) text += event.text;
    completions.push_back(completion_object(header, text, std::move(logprobs), std::string(finish_reason_name(outcomes[c].finish_reason)),
                                            index == 0 ? usage_json(outcomes[c].prompt_tokens, completion_tokens)
                                                       : Json()));
  }
  response.set_content(dump(join_choices(std::move(completions))), "application/json");
}

// The state of one SSE response, advanced by httplib's content-provider calls (each on the
// connection's thread): wait for events, write them as chunks (each names its choice's
// index), finish with [DONE]. With several choices, each ends with its own finish_reason
// chunk and the usage comes last in a chunk with no choices, as OpenAI streams them.
class EventStream {
 public:
  EventStream(const ServerContext& context, Jobs jobs, CompletionHeader header, ConnectionWatch client,
              std::vector<TokenEvent> prompt_scores)
      : jobs_(std::move(jobs)), header_(std::move(header)), client_(client), prompt_scores_(std::move(prompt_scores)) {
    for (std::size_t i = 0; i < jobs_.size(); ++i) logprobs_.push_back(make_logprobs(context, jobs_[i]->request()));
    outcomes_.resize(jobs_.size());
  }

  // Returns false to abort the response (the client is gone).
  bool pump(httplib::DataSink& sink) {
    const CompletionRequest& request = jobs_.front()->request();
    if (!started_) {
      started_ = true;
      if (request.echo)
        for (std::size_t i = 0; i < jobs_.size(); ++i) {
          if (request.return_logprobs) add_echoed_prompt(logprobs_[i], request, prompt_scores_);
          if (!write_chunk(sink, i, request.prompt_text, nullptr)) return false;
        }
    }
    bool any = false;
    for (std::size_t i = 0; i < jobs_.size(); ++i) {
      if (outcomes_[i]) continue;
      events_.clear();
      // One choice: wait on it; several: look at each in turn without blocking on one.
      const auto wait = jobs_.size() == 1 ? kPollInterval : std::chrono::milliseconds(5);
      outcomes_[i] = jobs_[i]->wait(events_, wait);
      for (const auto& event : events_) {
        any = true;
        if (request.return_logprobs) {
          logprobs_[i].add(event);
          logprobs_[i].cover(event.text.size());
        }
        // Tokens whose text is held back (half a character, a possible stop string) ride
        // along with the next chunk that has text.
        if (!event.text.empty() && !write_chunk(sink, i, event.text, nullptr)) return false;
      }
      if (!outcomes_[i]) continue;
      any = true;
      if (outcomes_[i]->error_status != 0) {
        cancel_all(jobs_);
        if (!write(sink, sse_event(dump(outcome_error(*outcomes_[i]))))) return false;
        return finish(sink);
      }
      if (request.return_logprobs)
        logprobs_[i].finish(cut_by_stop_string(*outcomes_[i], request, logprobs_[i].last_id()));
      completion_tokens_ += outcomes_[i]->completion_tokens;
      const bool last = std::all_of(outcomes_.begin(), outcomes_.end(), [](const auto& o) { return o.has_value(); });
      Json usage = request.include_usage && last && jobs_.size() == 1 ? this_usage() : Json();
      if (!write_chunk(sink, i, "", std::string(finish_reason_name(outcomes_[i]->finish_reason)), std::move(usage))) return false;
      if (last) {
        if (jobs_.size() > 1 && request.include_usage) {
          Json tail = completion_object(header_, "", nullptr, nullptr, this_usage());
          tail["choices"] = Json::array();
          if (!write(sink, sse_event(dump(tail)))) return false;
        }
        return finish(sink);
      }
    }
    if (!any && client_.closed()) return gone();
    return true;  // httplib calls again
  }

  void release() { cancel_all(jobs_); }  // no-op once the jobs finished

 private:
  Json this_usage() const { return usage_json(static_cast<int>(jobs_.front()->request().prompt_ids.size()), completion_tokens_); }

  bool finish(httplib::DataSink& sink) {
    if (!write(sink, std::string(kSseDone))) return false;
    sink.done();
    return true;
  }

  bool write_chunk(httplib::DataSink& sink, std::size_t index, std::string_view text, Json finish_reason,
                   Json usage = nullptr) {
    Json logprobs = nullptr;
    if (jobs_.front()->request().return_logprobs) logprobs = logprobs_[index].take();
    Json chunk = completion_object(header_, text, std::move(logprobs), std::move(finish_reason), std::move(usage));
    chunk["choices"][0]["index"] = index;
    return write(sink, sse_event(dump(chunk)));
  }

  bool write(httplib::DataSink& sink, const std::string& bytes) {
    if (sink.write(bytes.data(), bytes.size())) return true;
    return gone();
  }

  bool gone() {
    cancel_all(jobs_);
    return false;
  }

  Jobs jobs_;
  CompletionHeader header_;
  ConnectionWatch client_;
  std::vector<TokenEvent> prompt_scores_;
  std::vector<LogprobsBuilder> logprobs_;
  std::vector<std::optional<JobOutcome>> outcomes_;
  std::vector<TokenEvent> events_;
  int completion_tokens_ = 0;
  bool started_ = false;
};

// The echoed prompt's scores (echo with logprobs), computed on this connection's thread with
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

void handle_completion(ServerContext& context, const httplib::Request& http_request, httplib::Response& response) {
  const std::uint64_t seed = context.next_seed.fetch_add(1, std::memory_order_relaxed);
  CompletionRequest request = parse_completion_request(http_request.body, context.tokenizer, context.limits, seed);
  CompletionHeader header{completion_id(), unix_now(), request.model.empty() ? context.model_id : request.model};
  const bool stream = request.stream;
  if (request.use_beam_search) return answer_beam_search(context, request, header, response);
  std::vector<TokenEvent> scores = prompt_scores(context, request);
  // best_of candidates, candidate i sampled with seed + i. Each Sequence is built here, not on
  // the scheduler thread, so its own checks fail as a 400 before anything is queued or streamed.
  Jobs jobs;
  for (int i = 0; i < request.best_of; ++i) {
    CompletionRequest one = request;
    one.options.sampling.seed = request.options.sampling.seed + static_cast<std::uint64_t>(i);
    generate::Sequence sequence(context.tokenizer, one.prompt_ids, one.options, context.model.config().n_positions);
    jobs.push_back(std::make_shared<Job>(std::move(one), std::move(sequence), Clock::now() + context.timeout));
  }

  for (const auto& job : jobs) {
    const auto admission = context.scheduler.submit(job);
    if (admission == Scheduler::Admission::accepted) continue;
    cancel_all(jobs);  // the ones already queued end at the scheduler's next look
    if (admission == Scheduler::Admission::queue_full) {
      context.metrics.count_rejected();
      response.set_header("Retry-After", "1");
      throw HttpError(503, str("the server is busy: ", context.scheduler.options().max_batch, " running and ",
                               context.scheduler.queue_depth(), " queued requests; retry later"),
                      "", "server_error");
    }
    throw HttpError(503, "the server is shutting down", "", "server_error");
  }

  const ConnectionWatch client(http_request);
  if (!stream) return answer_whole(context, jobs, header, scores, client, response);

  auto events = std::make_shared<EventStream>(context, jobs, std::move(header), client, std::move(scores));
  response.set_header("Cache-Control", "no-cache");
  response.set_header("X-Accel-Buffering", "no");  // proxies: do not buffer the stream
  response.set_chunked_content_provider(
      "text/event-stream", [events](std::size_t, httplib::DataSink& sink) { return events->pump(sink); },
      [events](bool) { events->release(); });
}

}  // namespace kael::serve
