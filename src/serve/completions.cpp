// POST /v1/completions (completions.hpp).
#include "serve/completions.hpp"

#include <chrono>
#include <cstdio>
#include <memory>
#include <random>

#include "kael/core/error.hpp"
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

void answer_whole(ServerContext& context, const std::shared_ptr<Job>& job, const CompletionHeader& header,
                  const ConnectionWatch& client, httplib::Response& response) {
  const CompletionRequest& request = job->request();
  std::vector<TokenEvent> events;
  std::optional<JobOutcome> outcome;
  while (!(outcome = job->wait(events, kPollInterval))) {
    // The scheduler ends a cancelled job at its next step; the loop then sees the outcome.
    if (client.closed()) job->cancel();
  }
  if (outcome->error_status != 0) {
    response.status = outcome->error_status;
    response.set_content(dump(outcome_error(*outcome)), "application/json");
    return;
  }
  std::string text = request.echo ? request.prompt_text : std::string();
  Json logprobs = nullptr;
  if (request.options.logprobs) {
    LogprobsBuilder builder = make_logprobs(context, request);
    if (request.echo)
      for (const auto id : request.prompt_ids) builder.add_prompt_token(id);
    for (const auto& event : events) {
      builder.add(event);
      builder.cover(event.text.size());
    }
    builder.finish(cut_by_stop_string(*outcome, request, builder.last_id()));
    logprobs = builder.take();
  }
  for (const auto& event : events) text += event.text;
  response.set_content(dump(completion_object(header, text, std::move(logprobs), std::string(finish_reason_name(outcome->finish_reason)),
                                              usage_json(outcome->prompt_tokens, outcome->completion_tokens))),
                       "application/json");
}

// The state of one SSE response, advanced by httplib's content-provider calls (each on the
// connection's thread): wait for events, write them as chunks, finish with [DONE].
class EventStream {
 public:
  EventStream(const ServerContext& context, std::shared_ptr<Job> job, CompletionHeader header, ConnectionWatch client)
      : job_(std::move(job)),
        header_(std::move(header)),
        client_(client),
        logprobs_(make_logprobs(context, job_->request())) {}

  // Returns false to abort the response (the client is gone).
  bool pump(httplib::DataSink& sink) {
    const CompletionRequest& request = job_->request();
    if (!started_) {
      started_ = true;
      if (request.echo) {
        if (request.options.logprobs)
          for (const auto id : request.prompt_ids) logprobs_.add_prompt_token(id);
        if (!write_chunk(sink, request.prompt_text, nullptr)) return false;
      }
    }
    events_.clear();
    const auto outcome = job_->wait(events_, kPollInterval);
    for (const auto& event : events_) {
      if (request.options.logprobs) {
        logprobs_.add(event);
        logprobs_.cover(event.text.size());
      }
      // Tokens whose text is held back (half a character, a possible stop string) ride
      // along with the next chunk that has text.
      if (!event.text.empty() && !write_chunk(sink, event.text, nullptr)) return false;
    }
    if (!outcome) {
      if (client_.closed()) return gone();
      return true;  // httplib calls again
    }
    if (outcome->error_status != 0) {
      if (!write(sink, sse_event(dump(outcome_error(*outcome))))) return false;
    } else {
      if (request.options.logprobs) logprobs_.finish(cut_by_stop_string(*outcome, request, logprobs_.last_id()));
      Json usage = request.include_usage ? usage_json(outcome->prompt_tokens, outcome->completion_tokens) : Json();
      if (!write_chunk(sink, "", std::string(finish_reason_name(outcome->finish_reason)), std::move(usage))) return false;
    }
    if (!write(sink, std::string(kSseDone))) return false;
    sink.done();
    return true;
  }

  void release() { job_->cancel(); }  // no-op once the job finished

 private:
  bool write_chunk(httplib::DataSink& sink, std::string_view text, Json finish_reason, Json usage = nullptr) {
    Json logprobs = nullptr;
    if (job_->request().options.logprobs) logprobs = logprobs_.take();
    return write(sink, sse_event(dump(completion_object(header_, text, std::move(logprobs), std::move(finish_reason),
                                                         std::move(usage)))));
  }

  bool write(httplib::DataSink& sink, const std::string& bytes) {
    if (sink.write(bytes.data(), bytes.size())) return true;
    return gone();
  }

  bool gone() {
    job_->cancel();
    return false;
  }

  std::shared_ptr<Job> job_;
  CompletionHeader header_;
  ConnectionWatch client_;
  LogprobsBuilder logprobs_;
  std::vector<TokenEvent> events_;
  bool started_ = false;
};

}  // namespace

void handle_completion(ServerContext& context, const httplib::Request& http_request, httplib::Response& response) {
  const std::uint64_t seed = context.next_seed.fetch_add(1, std::memory_order_relaxed);
  CompletionRequest request = parse_completion_request(http_request.body, context.tokenizer, context.limits, seed);
  // Built here, not on the scheduler thread, so its own checks fail as a 400 before anything
  // is queued or streamed.
  generate::Sequence sequence(context.tokenizer, request.prompt_ids, request.options,
                              context.model.config().n_positions);
  CompletionHeader header{completion_id(), unix_now(), request.model.empty() ? context.model_id : request.model};
  const bool stream = request.stream;
  auto job = std::make_shared<Job>(std::move(request), std::move(sequence), Clock::now() + context.timeout);

  switch (context.scheduler.submit(job)) {
    case Scheduler::Admission::accepted:
      break;
    case Scheduler::Admission::queue_full:
      context.metrics.count_rejected();
      response.set_header("Retry-After", "1");
      throw HttpError(503, str("the server is busy: ", context.scheduler.options().max_batch, " running and ",
                               context.scheduler.queue_depth(), " queued requests; retry later"),
                      "", "server_error");
    case Scheduler::Admission::shutting_down:
      throw HttpError(503, "the server is shutting down", "", "server_error");
  }

  const ConnectionWatch client(http_request);
  if (!stream) return answer_whole(context, job, header, client, response);

  auto events = std::make_shared<EventStream>(context, job, std::move(header), client);
  response.set_header("Cache-Control", "no-cache");
  response.set_header("X-Accel-Buffering", "no");  // proxies: do not buffer the stream
  response.set_chunked_content_provider(
      "text/event-stream", [events](std::size_t, httplib::DataSink& sink) { return events->pump(sink); },
      [events](bool) { events->release(); });
}

}  // namespace kael::serve
