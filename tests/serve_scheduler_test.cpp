// The continuous-batching scheduler (serve/scheduler.hpp) on a tiny random GPT-2 with GPT-2's
// vocabulary: a job streams the tokens and text generate() gives for the same request and ends
// with "length"; jobs decoded together, a prefix-cache hit and jobs serialized by a small KV
// pool all give their solo tokens bit for bit; the queue bound refuses with queue_full, also
// when the KV pool is what is full, and a job the pool can never hold with never_fits; cancel,
// a past deadline and stop() end jobs as cancelled, 504 (counted as timeouts) and 503. Every
// wait is bounded.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/generate/generator.hpp"
#include "model_testing.hpp"
#include "serve/job.hpp"
#include "serve/metrics.hpp"
#include "serve/scheduler.hpp"

using namespace kael;
using namespace kael::serve;
using namespace std::chrono_literals;
namespace testing_model = kael::model::testing;

namespace {

const text::Tokenizer& tokenizer() {
  static const text::Tokenizer tok = text::Tokenizer::from_directory(KAEL_GPT2_TOKENIZER_DIR);
  return tok;
}

// 2 layers of 64, 128 positions (4 KV blocks), GPT-2's 50257 tokens: the output head makes a
// decode step take a fraction of a millisecond, so a 127-token job lasts long enough for a
// test to act on it while it runs.
struct Tiny {
  model::Config config = [] {
    model::Config c;
    c.n_layer = 2;
    c.n_head = 4;
    c.n_embd = 64;
    c.n_positions = 128;
    c.vocab_size = 50257;
    return c;
  }();
  std::map<std::string, Tensor> tensors = testing_model::tiny_checkpoint(config, 11);
  model::GPT2 model = model::GPT2::from_tensors(config, testing_model::share(tensors), "tiny");
};

Tiny& tiny() {
  static Tiny t;
  return t;
}

constexpr int kLongest = 127;  // max_tokens of a one-token prompt filling the context
constexpr auto kBound = 60s;   // no wait in these tests lasts longer

// What completions.cpp builds from a parsed request: greedy unless a seed is given, and past
// <|endoftext|> so that every job runs to max_tokens.
CompletionRequest request(std::vector<std::int32_t> prompt, int max_tokens) {
  CompletionRequest r;
  r.prompt_text = tokenizer().decode(prompt);
  r.prompt_ids = std::move(prompt);
  r.options.sampling.temperature = 0.0f;
  r.options.max_new_tokens = max_tokens;
  r.options.ignore_eos = true;
  return r;
}

std::shared_ptr<Job> make_job(CompletionRequest r, Clock::time_point deadline = Clock::now() + kBound) {
  generate::Sequence sequence(tokenizer(), r.prompt_ids, r.options, tiny().config.n_positions);
  return std::make_shared<Job>(std::move(r), std::move(sequence), deadline);
}

std::shared_ptr<Job> make_job(std::vector<std::int32_t> prompt, int max_tokens) {
  return make_job(request(std::move(prompt), max_tokens));
}

// A job's events and outcome as its HTTP thread sees them.
struct Seen {
  std::vector<TokenEvent> events;
  std::optional<JobOutcome> outcome;

  std::vector<std::int32_t> ids() const {
    std::vector<std::int32_t> out;
    for (const auto& e : events) out.push_back(e.id);
    return out;
  }
  std::string text() const {
    std::string out;
    for (const auto& e : events) out += e.text;
    return out;
  }
};

// Takes the job's events until it finishes. After kBound: a test failure, and an outcome
// (status -1) that fails the caller's checks but is safe to read.
Seen await(Job& job, Seen seen = {}) {
  const auto give_up = Clock::now() + kBound;
  while (!seen.outcome && Clock::now() < give_up) seen.outcome = job.wait(seen.events, 20ms);
  if (!seen.outcome) {
    ADD_FAILURE() << "the job did not finish within " << kBound.count() << " s";
    seen.outcome = JobOutcome{.error_status = -1, .error_message = "did not finish"};
  }
  return seen;
}

// Takes events until the job has pushed its first token (or finished).
Seen await_first_token(Job& job) {
  Seen seen;
  const auto give_up = Clock::now() + kBound;
  while (seen.events.empty() && !seen.outcome && Clock::now() < give_up) seen.outcome = job.wait(seen.events, 20ms);
  if (seen.events.empty()) ADD_FAILURE() << "the job produced no token";
  return seen;
}

// What generate() gives for the same request: the reference a job must equal.
generate::GenerateResult solo(const CompletionRequest& r) {
  return generate::generate(tiny().model, tokenizer(), r.prompt_ids, r.options);
}

// The value of one sample ("name" or "name{labels}") in the Prometheus text.
double metric(const Metrics& metrics, const std::string& sample) {
  std::istringstream lines(metrics.render(0, 0, 0));
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(sample + " ", 0) == 0) return std::stod(line.substr(sample.size() + 1));
  ADD_FAILURE() << "no sample " << sample << " in the metrics";
  return -1.0;
}

// Decode steps that ran more than one sequence.
double batched_steps(const Metrics& metrics) {
  return metric(metrics, "kael_batch_size_count") - metric(metrics, R"(kael_batch_size_bucket{le="1"})");
}

SchedulerOptions options(int max_batch, int max_queue = 8) {
  SchedulerOptions o;
  o.max_batch = max_batch;
  o.max_queue = max_queue;
  o.prefill_chunk = 1024;  // each prompt in one forward call, as generate() feeds it
  return o;
}

}  // namespace

TEST(Scheduler, AGreedyJobStreamsTheTokensAndTextOfGenerateAndEndsWithLength) {
  Metrics metrics;
  Scheduler scheduler(tiny().model, options(4), metrics);
  const CompletionRequest r = request({15496, 11, 995, 0, 383}, 20);
  const auto job = make_job(r);
  ASSERT_EQ(scheduler.submit(job), Scheduler::Admission::accepted);
  const Seen seen = await(*job);
  ASSERT_TRUE(seen.outcome);

  const auto want = solo(r);
  EXPECT_EQ(want.ids.size(), 20u);
  EXPECT_EQ(seen.ids(), want.ids);
  EXPECT_EQ(seen.text(), want.text);
  EXPECT_EQ(seen.outcome->finish_reason, FinishReason::length);
  EXPECT_EQ(seen.outcome->error_status, 0);
  EXPECT_EQ(seen.outcome->prompt_tokens, 5);
  EXPECT_EQ(seen.outcome->completion_tokens, 20);
  EXPECT_EQ(metric(metrics, "kael_generated_tokens_total"), 20);
  EXPECT_EQ(metric(metrics, "kael_prompt_tokens_total"), 5);
  EXPECT_EQ(metric(metrics, R"(kael_completions_finished_total{reason="length"})"), 1);
}

TEST(Scheduler, SampledAndLogprobJobsEqualGenerateToo) {
  Metrics metrics;
  Scheduler scheduler(tiny().model, options(4), metrics);
  CompletionRequest r = request({464, 2068, 7586}, 24);
  r.options.sampling.temperature = 0.9f;
  r.options.sampling.top_k = 50;
  r.options.sampling.seed = 1234;
  r.options.logprobs = true;
  r.options.top_logprobs = 3;
  const auto job = make_job(r);
  ASSERT_EQ(scheduler.submit(job), Scheduler::Admission::accepted);
  const Seen seen = await(*job);
  const auto want = solo(r);
  EXPECT_EQ(seen.ids(), want.ids);
  EXPECT_EQ(seen.text(), want.text);
  ASSERT_EQ(seen.events.size(), 24u);
  for (const auto& e : seen.events) {
    EXPECT_LE(e.logprob, 0.0f);
    ASSERT_EQ(e.top.size(), 3u);
    EXPECT_GE(e.top[0].logprob, e.logprob);  // the most likely token is at least as likely as the one drawn
  }
}

TEST(Scheduler, MaxTokensZeroEndsWithLengthAndNoToken) {
  Metrics metrics;
  Scheduler scheduler(tiny().model, options(1), metrics);
  const auto job = make_job({15496, 11}, 0);
  ASSERT_EQ(scheduler.submit(job), Scheduler::Admission::accepted);
  const Seen seen = await(*job);
  ASSERT_TRUE(seen.outcome);
  EXPECT_TRUE(seen.events.empty());
  EXPECT_EQ(seen.outcome->finish_reason, FinishReason::length);
  EXPECT_EQ(seen.outcome->completion_tokens, 0);
  EXPECT_EQ(seen.outcome->error_status, 0);
}

TEST(Scheduler, ASubmitPastTheQueueBoundIsRefusedAsQueueFull) {
  {  // max_queue 0: the one batch slot is the only room.
    Metrics metrics;
    Scheduler scheduler(tiny().model, options(/*max_batch=*/1, /*max_queue=*/0), metrics);
    const auto running = make_job({464}, kLongest);
    ASSERT_EQ(scheduler.submit(running), Scheduler::Admission::accepted);
    EXPECT_EQ(scheduler.submit(make_job({464}, 1)), Scheduler::Admission::queue_full);
    EXPECT_EQ(await(*running).outcome->finish_reason, FinishReason::length);
  }
  {  // max_queue 1: one running, one waiting, the third refused; both accepted ones complete.
    Metrics metrics;
    Scheduler scheduler(tiny().model, options(1, 1), metrics);
    const auto first = make_job({464}, kLongest);
    const auto second = make_job({318}, 5);
    ASSERT_EQ(scheduler.submit(first), Scheduler::Admission::accepted);
    ASSERT_EQ(scheduler.submit(second), Scheduler::Admission::accepted);
    EXPECT_EQ(scheduler.submit(make_job({464}, 1)), Scheduler::Admission::queue_full);
    EXPECT_EQ(await(*first).outcome->completion_tokens, kLongest);
    const Seen seen = await(*second);
    EXPECT_EQ(seen.outcome->finish_reason, FinishReason::length);
    EXPECT_EQ(seen.events.size(), 5u);
    // With the slot free again, a submit is accepted.
    const auto later = make_job({464}, 1);
    EXPECT_EQ(scheduler.submit(later), Scheduler::Admission::accepted);
    EXPECT_EQ(await(*later).outcome->finish_reason, FinishReason::length);
  }
}

TEST(Scheduler, ACancelledRunningJobEndsAsCancelledAndFreesItsSlot) {
  Metrics metrics;
  Scheduler scheduler(tiny().model, options(1), metrics);
  const auto job = make_job({464}, kLongest);
  ASSERT_EQ(scheduler.submit(job), Scheduler::Admission::accepted);
  Seen seen = await_first_token(*job);
  job->cancel();
  seen = await(*job, std::move(seen));
  ASSERT_TRUE(seen.outcome);
  EXPECT_EQ(seen.outcome->finish_reason, FinishReason::cancelled);
  EXPECT_EQ(seen.outcome->error_status, 0);
  EXPECT_LT(seen.outcome->completion_tokens, kLongest);
  EXPECT_EQ(static_cast<std::size_t>(seen.outcome->completion_tokens), seen.events.size());
  EXPECT_EQ(metric(metrics, R"(kael_completions_finished_total{reason="cancelled"})"), 1);
  // The one slot is free: the next job runs.
  const auto next = make_job({464}, 3);
  ASSERT_EQ(scheduler.submit(next), Scheduler::Admission::accepted);
  EXPECT_EQ(await(*next).outcome->finish_reason, FinishReason::length);
}

TEST(Scheduler, AJobCancelledBeforeItRunsEndsAsCancelledWithoutATokenAndDoesNotHoldUpTheQueue) {
  Metrics metrics;
  Scheduler scheduler(tiny().model, options(1), metrics);
  const auto gone = make_job({464, 318}, kLongest - 1);
  gone->cancel();
  const auto next = make_job({464}, 4);
  ASSERT_EQ(scheduler.submit(gone), Scheduler::Admission::accepted);
  ASSERT_EQ(scheduler.submit(next), Scheduler::Admission::accepted);
  const Seen seen = await(*gone);
  EXPECT_EQ(seen.outcome->finish_reason, FinishReason::cancelled);
  EXPECT_EQ(seen.outcome->prompt_tokens, 2);
  EXPECT_EQ(seen.outcome->completion_tokens, 0);
  EXPECT_TRUE(seen.events.empty());
  EXPECT_EQ(await(*next).outcome->completion_tokens, 4);
}

TEST(Scheduler, AJobPastItsDeadlineEndsWith504Timeout) {
  Metrics metrics;
  Scheduler scheduler(tiny().model, options(1), metrics);
  const auto late = make_job(request({464}, kLongest), Clock::now() - 1ms);
  ASSERT_EQ(scheduler.submit(late), Scheduler::Admission::accepted);
  const Seen seen = await(*late);
  ASSERT_TRUE(seen.outcome);
  EXPECT_EQ(seen.outcome->error_status, 504);
  EXPECT_EQ(seen.outcome->error_type, "timeout");
  EXPECT_NE(seen.outcome->error_message.find("timed out"), std::string::npos) << seen.outcome->error_message;
  EXPECT_TRUE(seen.events.empty());
  EXPECT_EQ(metric(metrics, R"(kael_completions_finished_total{reason="timeout"})"), 1);
}

TEST(Scheduler, StopEndsQueuedAndRunningJobsWith503AndRefusesLaterSubmits) {
  Metrics metrics;
  Scheduler scheduler(tiny().model, options(1), metrics);
  const auto running = make_job({464}, kLongest);
  const auto queued = make_job({318}, kLongest);
  ASSERT_EQ(scheduler.submit(running), Scheduler::Admission::accepted);
  ASSERT_EQ(scheduler.submit(queued), Scheduler::Admission::accepted);
  Seen seen = await_first_token(*running);
  scheduler.stop();

  seen = await(*running, std::move(seen));
  ASSERT_TRUE(seen.outcome);
  EXPECT_EQ(seen.outcome->error_status, 503);
  EXPECT_NE(seen.outcome->error_message.find("shutting down"), std::string::npos) << seen.outcome->error_message;
  EXPECT_LT(seen.events.size(), static_cast<std::size_t>(kLongest));
  const Seen waited = await(*queued);
  ASSERT_TRUE(waited.outcome);
  EXPECT_EQ(waited.outcome->error_status, 503);
  EXPECT_TRUE(waited.events.empty());

  EXPECT_EQ(scheduler.submit(make_job({464}, 1)), Scheduler::Admission::shutting_down);
  scheduler.stop();  // idempotent
  EXPECT_EQ(scheduler.queue_depth(), 0);
  EXPECT_EQ(scheduler.active_count(), 0);
}

TEST(Scheduler, JobsDecodedTogetherEachGiveTheirSoloTokensBitForBit) {
  Metrics metrics;
  Scheduler scheduler(tiny().model, options(4), metrics);
  std::vector<CompletionRequest> requests = {
      request(testing_model::some_ids(3, 50257, 1), 60),
      request(testing_model::some_ids(11, 50257, 2), 35),
      request(testing_model::some_ids(20, 50257, 3), 50),
      request(testing_model::some_ids(28, 50257, 4), 45),
  };
  requests[2].options.sampling.temperature = 1.0f;  // one sampled job among the greedy ones
  requests[2].options.sampling.seed = 77;
  std::vector<std::shared_ptr<Job>> jobs;
  for (const auto& r : requests) {
    jobs.push_back(make_job(r));
    ASSERT_EQ(scheduler.submit(jobs.back()), Scheduler::Admission::accepted);
  }
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const Seen seen = await(*jobs[i]);
    const auto want = solo(requests[i]);
    EXPECT_EQ(seen.ids(), want.ids) << "job " << i;
    EXPECT_EQ(seen.text(), want.text) << "job " << i;
    EXPECT_EQ(seen.outcome->finish_reason, FinishReason::length) << "job " << i;
  }
  EXPECT_GT(batched_steps(metrics), 0) << "no decode step ran more than one sequence";
}

TEST(Scheduler, APrefixCacheHitGivesTheTokensOfNoCache) {
  // Two prompts sharing their first 70 tokens: the second can take 2 cached blocks (64 positions).
  const auto shared = testing_model::some_ids(70, 50257, 9);
  auto first_prompt = shared, second_prompt = shared;
  first_prompt.insert(first_prompt.end(), {11, 12, 13});
  second_prompt.insert(second_prompt.end(), {21, 22});
  const std::vector<CompletionRequest> requests = {request(first_prompt, 20), request(second_prompt, 30)};

  const auto run = [&](std::int64_t cache_blocks, Metrics& metrics) {
    SchedulerOptions o = options(2);
    o.prefix_cache_blocks = cache_blocks;
    Scheduler scheduler(tiny().model, o, metrics);
    std::vector<std::vector<std::int32_t>> ids;
    for (const auto& r : requests) {  // one after the other: the first publishes its blocks
      const auto job = make_job(r);
      EXPECT_EQ(scheduler.submit(job), Scheduler::Admission::accepted);
      ids.push_back(await(*job).ids());
    }
    return ids;
  };
  Metrics cached_metrics, plain_metrics;
  const auto cached = run(8, cached_metrics);
  const auto plain = run(0, plain_metrics);
  EXPECT_EQ(metric(cached_metrics, "kael_prefix_cache_hits_total"), 1);
  EXPECT_EQ(metric(cached_metrics, "kael_prefix_cache_reused_tokens_total"), 64);
  EXPECT_EQ(metric(cached_metrics, "kael_prompt_tokens_total"), 73 + 72 - 64);  // the cached ones not prefilled
  EXPECT_EQ(metric(plain_metrics, "kael_prefix_cache_hits_total"), 0);
  ASSERT_EQ(cached.size(), 2u);
  EXPECT_EQ(cached, plain);
  EXPECT_EQ(cached[1], solo(requests[1]).ids);
}

TEST(Scheduler, JobsTheKvPoolCannotHoldTogetherRunOneAfterTheOther) {
  // Each job needs 60 positions, 2 blocks of 32; the pool has 3, so only one runs at a time.
  Metrics metrics;
  SchedulerOptions o = options(2);
  o.kv_blocks = 3;
  Scheduler scheduler(tiny().model, o, metrics);
  ASSERT_EQ(scheduler.kv_pool()->total_blocks(), 3);
  const std::vector<CompletionRequest> requests = {request(testing_model::some_ids(10, 50257, 5), 50),
                                                   request(testing_model::some_ids(10, 50257, 6), 50)};
  std::vector<std::shared_ptr<Job>> jobs;
  for (const auto& r : requests) {
    jobs.push_back(make_job(r));
    ASSERT_EQ(scheduler.submit(jobs.back()), Scheduler::Admission::accepted);
  }
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const Seen seen = await(*jobs[i]);
    EXPECT_EQ(seen.outcome->finish_reason, FinishReason::length) << "job " << i;
    EXPECT_EQ(seen.ids(), solo(requests[i]).ids) << "job " << i;
  }
  EXPECT_EQ(metric(metrics, "kael_batch_size_count"), 2 * 49);  // the first token of each comes from its prefill
  EXPECT_EQ(batched_steps(metrics), 0) << "two jobs decoded together in a pool that holds one";

  // A job that needs more blocks than the whole pool is refused by submit itself, before its
  // client is answered anything (it would wait forever).
  const auto too_big = make_job(testing_model::some_ids(10, 50257, 7), 110);  // 120 positions: 4 blocks
  EXPECT_EQ(scheduler.blocks_needed(*too_big), 4);
  EXPECT_EQ(scheduler.submit(too_big), Scheduler::Admission::never_fits);
  EXPECT_EQ(scheduler.queue_depth(), 0);
}

TEST(Scheduler, TheQueueBoundHoldsWhenTheKvPoolIsWhatIsFull) {
  // 16 slots, one waiting job allowed, and a pool that one long job fills: free slots are no
  // room then, so of five more jobs one waits and four are refused.
  Metrics metrics;
  SchedulerOptions o = options(/*max_batch=*/16, /*max_queue=*/1);
  o.kv_blocks = 4;
  Scheduler scheduler(tiny().model, o, metrics);
  const auto filling = make_job({464}, kLongest);  // 128 positions: the 4 blocks
  ASSERT_EQ(scheduler.submit(filling), Scheduler::Admission::accepted);
  Seen seen = await_first_token(*filling);
  ASSERT_EQ(scheduler.kv_pool()->free_blocks(), 0);
  std::vector<std::shared_ptr<Job>> accepted;
  int refused = 0;
  for (int i = 0; i < 5; ++i) {
    auto job = make_job({318}, 3);
    const auto admission = scheduler.submit(job);
    if (admission == Scheduler::Admission::accepted) accepted.push_back(job);
    refused += admission == Scheduler::Admission::queue_full;
  }
  EXPECT_EQ(accepted.size(), 1u);
  EXPECT_EQ(refused, 4);
  EXPECT_EQ(await(*filling, std::move(seen)).outcome->completion_tokens, kLongest);
  for (const auto& job : accepted) EXPECT_EQ(await(*job).outcome->completion_tokens, 3);
}

TEST(Scheduler, AFreeSlotAndFreeBlocksAreRoomThatNeverWaits) {
  // max_queue 0 and an empty pool of 4 blocks: two 2-block jobs start at once and are both
  // accepted; a third could start only when one ends, so it would wait: refused.
  Metrics metrics;
  SchedulerOptions o = options(/*max_batch=*/4, /*max_queue=*/0);
  o.kv_blocks = 4;
  Scheduler scheduler(tiny().model, o, metrics);
  const auto a = make_job({464}, 60), b = make_job({318}, 60);  // 61 positions: 2 blocks each
  EXPECT_EQ(scheduler.submit(a), Scheduler::Admission::accepted);
  EXPECT_EQ(scheduler.submit(b), Scheduler::Admission::accepted);
  EXPECT_EQ(scheduler.submit(make_job({11}, 60)), Scheduler::Admission::queue_full);
  EXPECT_EQ(await(*a).outcome->completion_tokens, 60);
  EXPECT_EQ(await(*b).outcome->completion_tokens, 60);
}

TEST(Scheduler, AQueuedTimeoutSaysWhatItWaitedFor) {
  for (const bool slots_full : {true, false}) {
    Metrics metrics;
    SchedulerOptions o = options(/*max_batch=*/slots_full ? 1 : 2);
    o.kv_blocks = 4;
    Scheduler scheduler(tiny().model, o, metrics);
    const auto running = make_job({464}, kLongest);  // the one slot, or all 4 blocks
    ASSERT_EQ(scheduler.submit(running), Scheduler::Admission::accepted);
    Seen seen = await_first_token(*running);
    const auto late = make_job(request({318}, 3), Clock::now() - 1ms);
    ASSERT_EQ(scheduler.submit(late), Scheduler::Admission::accepted);
    const Seen timed_out = await(*late);
    EXPECT_EQ(timed_out.outcome->error_status, 504);
    const std::string expected = slots_full ? "waiting for a batch slot" : "waiting for KV memory";
    EXPECT_NE(timed_out.outcome->error_message.find(expected), std::string::npos) << timed_out.outcome->error_message;
    running->cancel();
    await(*running, std::move(seen));
  }
}

TEST(Scheduler, TimeoutsCountAsTimeoutsEvenWhenCancelledAfterAndEnterTheDurationHistogram) {
  // Three candidates of one request past their shared deadline, cancelled by their client once
  // the first 504 arrives (as a whole answer does), queued behind a running job or running.
  Metrics metrics;
  Scheduler scheduler(tiny().model, options(/*max_batch=*/1), metrics);
  const auto running = make_job({464}, kLongest);
  ASSERT_EQ(scheduler.submit(running), Scheduler::Admission::accepted);
  Seen seen = await_first_token(*running);
  const auto deadline = Clock::now() - 1ms;
  std::vector<std::shared_ptr<Job>> candidates;
  for (int i = 0; i < 3; ++i) {
    candidates.push_back(make_job(request({318}, 3), deadline));
    candidates.back()->cancel();
    ASSERT_EQ(scheduler.submit(candidates.back()), Scheduler::Admission::accepted);
  }
  for (const auto& job : candidates) EXPECT_EQ(await(*job).outcome->error_status, 504);
  EXPECT_EQ(metric(metrics, R"(kael_completions_finished_total{reason="timeout"})"), 3);
  EXPECT_EQ(metric(metrics, "kael_request_duration_seconds_count"), 3);
  running->cancel();
  await(*running, std::move(seen));
  EXPECT_EQ(metric(metrics, R"(kael_completions_finished_total{reason="cancelled"})"), 1);  // the running one
}

TEST(Scheduler, OptionsOutOfRangeAreValueErrors) {
  Metrics metrics;
  SchedulerOptions o = options(1);
  o.max_batch = 0;
  EXPECT_THROW(Scheduler(tiny().model, o, metrics), ValueError);
  o = options(1, -1);
  EXPECT_THROW(Scheduler(tiny().model, o, metrics), ValueError);
  o = options(1);
  o.prefill_chunk = 0;
  EXPECT_THROW(Scheduler(tiny().model, o, metrics), ValueError);
  o = options(1);
  o.kv_blocks = -1;
  EXPECT_THROW(Scheduler(tiny().model, o, metrics), ValueError);
}
