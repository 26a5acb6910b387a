// Parsing of the --ids option shared by the subcommands that take a prompt as token ids.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kael::cli {

// "15496, 11,995" -> {15496, 11, 995}; an all-blank list gives no ids. ValueError naming the
// item on an empty item or anything that is not a non-negative 32-bit integer.
std::vector<std::int32_t> parse_ids(const std::string& list);

}  // namespace kael::cli
