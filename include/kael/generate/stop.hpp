// Stop strings matched on the decoded text (docs/behaviour.md, "Generation"). Text reaches the
// caller only once it can no longer be the start of a stop string, so a stop string is never
// emitted, not even in part, even when it spans several tokens. Matching sees the text as a
// client shows it: each maximal invalid UTF-8 subpart (as Python's errors="replace" and JSON
// output render it) reads as U+FFFD, so a stop string holding U+FFFD matches where the text
// shows one; the text returned keeps its exact bytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kael::generate {

class StopMatcher {
 public:
  // ValueError on an empty stop string (it would match before any text).
  explicit StopMatcher(std::vector<std::string> stops = {});

  // Appends `text` and returns what is now safe to emit. When a stop string appears, returns
  // the text before its first occurrence, stopped() becomes true and later pushes return "".
  std::string push(std::string_view text);
  // Returns the held-back text (generation ended without a stop string).
  std::string flush();

  bool stopped() const { return stopped_; }
  // The stop string that matched ("" until one does).
  const std::string& matched() const { return matched_; }
  // Bytes held back because they could begin a stop string.
  std::size_t held() const { return held_.size(); }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  std::string matched_;
  bool stopped_ = false;
};

}  // namespace kael::generate
