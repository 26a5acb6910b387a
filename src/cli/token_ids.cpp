#include "cli/token_ids.hpp"

#include <algorithm>
#include <cstdint>

#include "kael/core/error.hpp"

namespace kael::cli {

std::vector<std::int32_t> parse_ids(const std::string& list) {
  std::vector<std::int32_t> ids;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = std::min(list.find(',', start), list.size());
    const std::string item = list.substr(start, end - start);
    const auto first = item.find_first_not_of(" \t");
    if (first == std::string::npos) {
      if (list.find_first_not_of(" \t") == std::string::npos) break;  // "--ids ''": no ids at all
      throw ValueError(str("--ids: empty item in '", list, "' (expected comma-separated token ids)"));
    }
    const std::string trimmed = item.substr(first, item.find_last_not_of(" \t") - first + 1);
    std::size_t used = 0;
    long long value = -1;
    try {
      value = std::stoll(trimmed, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != trimmed.size() || value < 0 || value > INT32_MAX)
      throw ValueError(str("--ids: '", trimmed, "' is not a token id (expected a non-negative integer)"));
    ids.push_back(static_cast<std::int32_t>(value));
    start = end + 1;
  }
  return ids;
}

}  // namespace kael::cli
