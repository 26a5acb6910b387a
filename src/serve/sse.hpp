// Server-Sent Events framing for the streamed completions: each event is one "data:" line
// (JSON has no raw newlines, so one line always suffices) and a blank line; the stream ends
// with OpenAI's "data: [DONE]" sentinel.
#pragma once

#include <string>
#include <string_view>

namespace kael::serve {

inline std::string sse_event(std::string_view json) {
  std::string out;
  out.reserve(json.size() + 8);
  out.append("data: ").append(json).append("\n\n");
  return out;
}

inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace kael::serve
