// Internal to src/train: the collectives a data-parallel run needs, over MPI_COMM_WORLD, and
// the rule for leaving: a process whose run failed ends every rank (MPI_Abort) when it exits,
// so no rank waits forever in a collective; one whose runs all succeeded calls MPI_Finalize.
// Every call here is collective: each rank makes the same calls in the same order. With one
// rank each is the identity. Not thread-safe: one thread calls at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kael/train/world.hpp"

namespace kael::train::dist {

// Sums each element over the ranks, in place; every rank gets the same bits.
void sum(std::span<float> values);
double sum(double value);
// True on every rank when it is true on any.
bool any(bool value);
// Rank 0's values, on every rank.
void broadcast(std::span<float> values);
void broadcast(std::span<std::int64_t> values);
// Every rank's `values` (each rank the same count), rank by rank.
std::vector<std::uint64_t> gather(std::span<const std::uint64_t> values);
std::vector<std::int32_t> gather(std::span<const std::int32_t> values);
std::vector<float> gather(std::span<const float> values);

// Marks this process's run as failed: its exit then ends the other ranks, unless the failure is
// one every rank found together (fail_together(), called before such an error is thrown), after
// which each rank leaves on its own.
void mark_failed();
void fail_together();
// Ends every rank now (MPI_Abort), for a rank that cannot leave any other way.
[[noreturn]] void abort_run();

// sum(), made by polling a non-blocking sum and sleeping `poll` between polls, so that a thread
// of its own can make it while the others compute: Open MPI moves data only inside its calls.
void sum_polling(std::span<float> values, std::chrono::microseconds poll);

}  // namespace kael::train::dist
