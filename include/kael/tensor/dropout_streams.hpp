// Dropout masks for a data-parallel trainer. Inside a DropoutStreams scope (on the thread that
// made it), each dropout in turn (kael::dropout, nn::Dropout, the dropout_p of
// scaled_dot_product_attention) takes the next stream of a counter-based generator instead of a
// draw of the process-wide one, and numbers its elements as rows first_row... of a larger batch
// along dimension 0: of a tensor with R rows of E elements each, element i is kept where the
// uniform draw for (seed, stream, first_row * E + i) is >= p. So ranks that each hold some rows
// of one batch draw the masks one process drawing the whole batch would, and a resumed run that
// starts at the same stream draws the masks of a run never interrupted. The process-wide
// generator is not advanced inside a scope. Scopes nest; the innermost is in force.
#pragma once

#include <cstdint>

namespace kael {

class DropoutStreams {
 public:
  // ValueError when first_row is negative.
  DropoutStreams(std::uint64_t seed, std::uint64_t first_stream, std::int64_t first_row = 0);
  ~DropoutStreams();
  DropoutStreams(const DropoutStreams&) = delete;
  DropoutStreams& operator=(const DropoutStreams&) = delete;

  // The stream the next dropout in this scope takes (first_stream + the dropouts so far).
  std::uint64_t next_stream() const { return stream_; }

  // Internal to the tensor library: the scope in force on this thread (null: none), and the
  // (seed, stream, first element) of the next dropout over a tensor of `rows` rows of
  // `row_elements` elements, advancing the stream.
  static DropoutStreams* current();
  struct Draw {
    std::uint64_t seed, stream, first;
  };
  Draw next(std::int64_t row_elements);

 private:
  std::uint64_t seed_, stream_;
  std::int64_t first_row_;
  DropoutStreams* outer_;
};

}  // namespace kael
