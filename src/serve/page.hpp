// The page served at "/": a prompt box, sampling settings, the streamed completion and the
// most likely alternatives for each generated token. Self-contained (no external resources).
#pragma once

#include <string_view>

namespace kael::serve {

std::string_view playground_page();

}  // namespace kael::serve
