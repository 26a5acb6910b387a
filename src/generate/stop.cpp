// StopMatcher: keeps the shortest tail of the text that could still grow into a stop string.
#include <algorithm>
#include <string_view>
#include <vector>

#include "kael/core/error.hpp"
#include "kael/generate/stop.hpp"

namespace kael::generate {
namespace {

// `raw` as a client shows it, with each maximal invalid subpart replaced by U+FFFD (the
// Unicode standard's recommended practice, which Python's decoder and nlohmann's JSON dump
// follow), and for each rendered byte offset the raw offset of the character it belongs to.
struct Rendering {
  std::string text;
  std::vector<std::size_t> raw_offset;  // text.size() + 1 entries
};

// Bytes in a well-formed sequence led by `lead` (0: not a lead byte), and the allowed range
// of the byte after it (the later ones are always 80..BF).
std::size_t sequence_length(unsigned char lead, unsigned char& low, unsigned char& high) {
  low = 0x80;
  high = 0xBF;
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) {
    if (lead == 0xE0) low = 0xA0;   // no overlongs
    if (lead == 0xED) high = 0x9F;  // no surrogates
    return 3;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;  // nothing past U+10FFFF
    return 4;
  }
  return 0;
}

Rendering render(std::string_view raw) {
  constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  Rendering out;
  out.text.reserve(raw.size());
  out.raw_offset.reserve(raw.size() + 1);
  const auto emit = [&](std::string_view piece, std::size_t at) {
    out.text.append(piece);
    out.raw_offset.insert(out.raw_offset.end(), piece.size(), at);
  };
  for (std::size_t i = 0; i < raw.size();) {
    unsigned char low, high;
    const std::size_t length = sequence_length(static_cast<unsigned char>(raw[i]), low, high);
    std::size_t valid = length == 0 ? 0 : 1;  // bytes of the sequence that fit so far
    while (valid > 0 && valid < length && i + valid < raw.size()) {
      const auto c = static_cast<unsigned char>(raw[i + valid]);
      if (c < (valid == 1 ? low : 0x80) || c > (valid == 1 ? high : 0xBF)) break;
      ++valid;
    }
    if (length != 0 && valid == length) {
      emit(raw.substr(i, length), i);
      i += length;
    } else {
      emit(kReplacement, i);  // the maximal subpart: at least one byte
      i += std::max<std::size_t>(valid, 1);
    }
  }
  out.raw_offset.push_back(raw.size());
  return out;
}

}  // namespace

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (std::size_t i = 0; i < stops_.size(); ++i)
    if (stops_[i].empty()) throw ValueError(str("stop string ", i, " is empty"));
}

std::string StopMatcher::push(std::string_view text) {
  if (stopped_) return {};
  held_.append(text);
  const Rendering shown = render(held_);

  // The earliest occurrence of any stop string wins; held_ never contains a whole one from
  // before, so searching all of it finds occurrences that span earlier pushes too.
  std::size_t first = std::string::npos;
  for (const auto& stop : stops_) {
    const std::size_t at = shown.text.find(stop);
    if (at < first) {
      first = at;
      matched_ = stop;
    }
  }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, shown.raw_offset[first]);
    held_.clear();
    return out;
  }

  // Hold back the longest suffix that is a proper prefix of some stop string. Stop strings
  // are UTF-8, so such a suffix starts on a character boundary of the rendered text.
  const std::string_view view = shown.text;
  std::size_t keep_from = view.size();
  for (const auto& stop : stops_) {
    const std::size_t longest = std::min(view.size(), stop.size() - 1);
    for (std::size_t len = longest; len > 0; --len) {
      if (view.substr(view.size() - len) == std::string_view(stop).substr(0, len)) {
        keep_from = std::min(keep_from, view.size() - len);
        break;
      }
    }
  }
  const std::size_t raw_keep = shown.raw_offset[keep_from];
  std::string out = held_.substr(0, raw_keep);
  held_.erase(0, raw_keep);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace kael::generate
