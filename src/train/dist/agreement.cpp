#include "train/dist/agreement.hpp"

#include <vector>

#include "kael/core/error.hpp"
#include "train/data/hash.hpp"
#include "train/dist/world.hpp"

namespace kael::train::dist {

std::uint64_t weights_hash(const std::vector<std::span<float>>& weights) {
  Hash64 hash;
  for (const std::span<float> w : weights) hash.update(std::as_bytes(w));
  return hash.digest();
}

void check_ranks_agree(const Fingerprint& mine, const WorldInfo& world) {
  if (world.size == 1) return;
  const std::uint64_t values[] = {mine.options, mine.data, mine.model};
  const std::vector<std::uint64_t> all = gather(values);
  const char* what[] = {"other options (steps, batch, sequence, schedule, optimizer, seed, evaluation or saving)",
                        "other training data (--data or its tokenizer)",
                        "another model (--model, --config or their weights)"};
  for (int r = 1; r < world.size; ++r)
    for (std::size_t i = 0; i < 3; ++i)
      if (all[static_cast<std::size_t>(r) * 3 + i] != all[i]) {
        fail_together();  // every rank sees the same hashes and stops here
        throw ValueError(str("rank ", r, " of ", world.size, " was started with ", what[i], " than rank 0; ",
                             "every rank of a run must be given the same command; nothing was trained"));
      }
}

void check_weights_agree(const std::vector<std::span<float>>& weights, const WorldInfo& world, std::int64_t step) {
  if (world.size == 1) return;
  const std::uint64_t mine[] = {weights_hash(weights)};
  const std::vector<std::uint64_t> all = gather(mine);
  for (int r = 1; r < world.size; ++r)
    if (all[static_cast<std::size_t>(r)] != all[0])
      throw Error(str("the weights of rank ", r, " differ from rank 0's at step ", step, "; nothing was saved"));
}

void share_from_rank0(const std::vector<std::span<float>>& buffers, std::span<std::int64_t> counters) {
  broadcast(counters);
  for (const std::span<float> buffer : buffers) broadcast(buffer);
}

}  // namespace kael::train::dist
