// Integer options read as decimal numbers in range, on every subcommand at once. CLI11 reads
// them with strtoull/strtoll in base 0, so "-1" wraps to 2^64-1 for an unsigned option, a
// number past 64 bits silently becomes the largest one, and "010" is eight.
#pragma once

#include <CLI/CLI.hpp>

namespace kael::cli {

// Adds to each integer option of `app` and its subcommands a check that every value given is
// decimal digits (with a leading '-' for a signed option) within 64 bits: a parse error naming
// the option, the value and the range otherwise. Narrower types keep CLI11's own range check.
void require_decimal_integers(CLI::App& app);

}  // namespace kael::cli
