// kael on CUDA devices, with torch.cuda's names: the same functions in every build. In a build
// without the CUDA backend, or on a machine without a usable GPU, is_available() is false,
// device_count() 0, synchronize() has nothing to wait for and the memory figures are 0; moving a
// tensor to "cuda" is then an Error naming the cause (core/device.hpp, check_device_available).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kael::cuda {

// True when this build has the CUDA backend and the machine has a GPU it can use.
bool is_available();
// The usable CUDA devices (0 where is_available() is false).
int device_count();
// Waits until the work queued on every CUDA device kael has used is done; returns at once
// where there is none. An Error if a device reports a failure of that work.
void synchronize();
// Seeds the generator of the CUDA devices' random operations (as torch.cuda.manual_seed_all),
// and the seed it holds.
void manual_seed(std::uint64_t seed);
std::uint64_t initial_seed();

// The caching allocator's figures for `device` (cuda:N), in bytes, as torch.cuda's: the memory
// held by live tensors, its peak since the start (or reset_peak_memory_stats), and what is
// reserved from the driver (live and cached blocks). 0 where CUDA is not available.
std::size_t memory_allocated(int device = 0);
std::size_t max_memory_allocated(int device = 0);
std::size_t memory_reserved(int device = 0);
void reset_peak_memory_stats(int device = 0);
// Returns the cached blocks (not held by any tensor) to the driver.
void empty_cache();

}  // namespace kael::cuda

namespace kael {
// The chapter's name for kael::cuda::synchronize(): a program calls it before reading a clock.
inline void cuda_synchronize() { cuda::synchronize(); }
}  // namespace kael
