// What the route handlers share: the model, tokenizer, scheduler, metrics and settings.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "kael/model/gpt2.hpp"
#include "kael/text/tokenizer.hpp"
#include "serve/metrics.hpp"
#include "serve/request.hpp"
#include "serve/scheduler.hpp"

namespace kael::serve {

struct ServerContext {
  const model::GPT2& model;
  const text::Tokenizer& tokenizer;
  Scheduler& scheduler;
  Metrics& metrics;
  RequestLimits limits;
  std::string model_id;             // what /v1/models lists and responses name
  std::int64_t started = 0;         // Unix seconds, the model's "created"
  Clock::duration timeout = std::chrono::seconds(600);  // per request, queue wait included
  std::atomic<std::uint64_t> next_seed{0};  // seeds for requests that give none
};

}  // namespace kael::serve
