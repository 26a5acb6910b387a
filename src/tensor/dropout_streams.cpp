#include "kael/tensor/dropout_streams.hpp"

#include "kael/core/error.hpp"
#include "tensor/seed.hpp"

namespace kael {

namespace {
thread_local DropoutStreams* innermost = nullptr;
}  // namespace

DropoutStreams::DropoutStreams(std::uint64_t seed, std::uint64_t first_stream, std::int64_t first_row)
    : seed_(seed), stream_(first_stream), first_row_(first_row), outer_(innermost) {
  if (first_row < 0) throw ValueError(str("DropoutStreams: first_row must not be negative, got ", first_row));
  innermost = this;
}

DropoutStreams::~DropoutStreams() { innermost = outer_; }

DropoutStreams* DropoutStreams::current() { return innermost; }

DropoutStreams::Draw DropoutStreams::next(std::int64_t row_elements) {
  return {seed_, stream_++, static_cast<std::uint64_t>(first_row_) * static_cast<std::uint64_t>(row_elements)};
}

kernels::DropoutMask tensor_detail::dropout_mask(double p, std::int64_t row_elements) {
  if (DropoutStreams* scope = DropoutStreams::current()) {
    const DropoutStreams::Draw draw = scope->next(row_elements);
    return {static_cast<float>(p), draw.seed, draw.stream, draw.first};
  }
  return {static_cast<float>(p), draw_seed(), 0, 0};
}

}  // namespace kael
