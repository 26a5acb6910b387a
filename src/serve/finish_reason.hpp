// Why a completion ended: the finish_reason of OpenAI's responses (stop, length) and the ends
// only the server sees (counted in /metrics by the same names).
#pragma once

#include <string>
#include <string_view>

#include "kael/core/error.hpp"

namespace kael::serve {

enum class FinishReason {
  stop,       // <|endoftext|> or a stop string
  length,     // max_tokens reached
  cancelled,  // the client went away
  timeout,    // the request's deadline passed
  error,      // the server could not run it
};

inline std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::cancelled: return "cancelled";
    case FinishReason::timeout: return "timeout";
    case FinishReason::error: return "error";
  }
  return "error";
}

// generate::Sequence names its end as a string ("stop", "length" or "cancelled").
inline FinishReason finish_reason_from(std::string_view sequence_reason) {
  for (FinishReason r : {FinishReason::stop, FinishReason::length, FinishReason::cancelled})
    if (finish_reason_name(r) == sequence_reason) return r;
  throw Error(str("a sequence finished for an unknown reason \"", sequence_reason, "\""));
}

}  // namespace kael::serve
