// StopMatcher: keeps the shortest tail of the text that could still grow into a stop string.
#include <algorithm>

#include "kael/core/error.hpp"
#include "kael/generate/stop.hpp"

namespace kael::generate {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (std::size_t i = 0; i < stops_.size(); ++i)
    if (stops_[i].empty()) throw ValueError(str("stop string ", i, " is empty"));
}

std::string StopMatcher::push(std::string_view text) {
  if (stopped_) return {};
  held_.append(text);

  // The earliest occurrence of any stop string wins; held_ never contains a whole one from
  // before, so searching all of it finds occurrences that span earlier pushes too.
  std::size_t first = std::string::npos;
  for (const auto& stop : stops_) {
    const std::size_t at = held_.find(stop);
    if (at < first) {
      first = at;
      matched_ = stop;
    }
  }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }

  // Hold back the longest suffix that is a proper prefix of some stop string. Stop strings
  // are UTF-8, so such a suffix starts on a character boundary of the (UTF-8) text.
  std::size_t keep_from = held_.size();
  for (const auto& stop : stops_) {
    const std::size_t longest = std::min(held_.size(), stop.size() - 1);
    for (std::size_t len = longest; len > 0; --len) {
      if (std::string_view(held_).substr(held_.size() - len) == std::string_view(stop).substr(0, len)) {
        keep_from = std::min(keep_from, held_.size() - len);
        break;
      }
    }
  }
  std::string out = held_.substr(0, keep_from);
  held_.erase(0, keep_from);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace kael::generate
