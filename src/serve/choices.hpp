// Several choices in one completion (n, best_of, beam search).
#pragma once

#include <vector>

#include "serve/json_text.hpp"

namespace kael::serve {

// Joins one-choice completion objects (as completion_object makes them) into one whose
// "choices" are theirs in order, with "index" 0 .. n-1; the rest (id, usage) is the first's.
Json join_choices(std::vector<Json> completions);

}  // namespace kael::serve
