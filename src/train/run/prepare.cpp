// The prepare stage: everything settled before a model exists.
#include <algorithm>
#include <cmath>

#include "kael/core/error.hpp"
#include "kael/text/tokenizer.hpp"
#include "train/data/hash.hpp"
#include "train/run/stages.hpp"

namespace kael::train {

namespace fs = std::filesystem;

namespace {

void validate(const RunOptions& o) {
  if (o.steps < 0) throw ValueError(str("--steps must not be negative, got ", o.steps));
  if (!(o.epochs >= 0) || !std::isfinite(o.epochs)) throw ValueError(str("--epochs must be a non-negative number, got ", o.epochs));
  if (o.steps == 0 && o.epochs == 0) throw ValueError("give --steps N or --epochs E (how long to train)");
  if (o.steps > 0 && o.epochs > 0) throw ValueError("give either --steps or --epochs, not both");
  if (o.batch < 1) throw ValueError(str("--batch must be at least 1, got ", o.batch));
  if (o.seq < 1) throw ValueError(str("--seq must be at least 1, got ", o.seq));
  if (o.accum < 1) throw ValueError(str("--accum must be at least 1, got ", o.accum));
  o.schedule.validate();
  const auto& a = o.adamw;
  if (!(a.beta1 >= 0 && a.beta1 < 1)) throw ValueError(str("--beta1 must be in [0, 1), got ", a.beta1));
  if (!(a.beta2 >= 0 && a.beta2 < 1)) throw ValueError(str("--beta2 must be in [0, 1), got ", a.beta2));
  if (!(a.eps > 0) || !std::isfinite(a.eps)) throw ValueError(str("--eps must be positive, got ", a.eps));
  if (!(a.weight_decay >= 0) || !std::isfinite(a.weight_decay))
    throw ValueError(str("--weight-decay must not be negative, got ", a.weight_decay));
  if (!(o.grad_clip >= 0) || !std::isfinite(o.grad_clip))
    throw ValueError(str("--grad-clip must not be negative (0 turns it off), got ", o.grad_clip));
  if (!(o.dropout >= 0 && o.dropout < 1)) throw ValueError(str("--dropout must be in [0, 1), got ", o.dropout));
  require_precision(o.precision);
  if (o.eval_every < 0) throw ValueError(str("--eval-every must not be negative, got ", o.eval_every));
  if (o.save_every < 0) throw ValueError(str("--save-every must not be negative, got ", o.save_every));
  if (o.resume && o.overwrite) throw ValueError("give either --resume or --overwrite, not both");
}

std::uint64_t hash_text(std::string_view text) {
  Hash64 hash;
  hash.update(text);
  return hash.digest();
}

std::uint64_t hash_tokens(std::span<const std::int32_t> tokens) {
  Hash64 hash;
  hash.update(std::as_bytes(tokens));
  return hash.digest();
}

}  // namespace

Plan prepare(const Source& source, const std::vector<fs::path>& data, const fs::path& out, RunOptions options) {
  const auto started = RunClock::now();
  validate(options);
  const model::Config& config = source.config;
  GptNet::net_config(config, options.dropout);  // a shape nn::GPT cannot train is refused before the data is read
  if (options.seq > config.n_positions)
    throw ValueError(str("--seq ", options.seq, " is above the model's n_positions ", config.n_positions));
  const WorldInfo world = train::world();
  const bool root = world.rank == 0;
  model::set_num_threads(options.threads);
  if (options.threads == 0 && world.local_size > 1)  // the machine's cores are shared by its ranks
    model::set_num_threads(std::max(1, model::num_threads() / world.local_size));

  // Data first (cheap checks, then tokenizing), so a bad input costs no model load.
  const auto files = list_data_files(data);
  const fs::path vocab = source.tokenizer_dir / "vocab.json", merges = source.tokenizer_dir / "merges.txt";
  const auto tokenizer = text::Tokenizer::from_files(vocab, merges);
  if (tokenizer.vocabulary_size() > static_cast<std::size_t>(config.vocab_size))
    throw ValueError(str("the tokenizer has ", tokenizer.vocabulary_size(), " tokens, more than the model's vocab_size ",
                         config.vocab_size));
  // Rank 0 alone owns OUT (the others may be on machines that do not see it) and its cache.
  CreatedOut created{out, root && prepare_out(out, options)};
  const fs::path tokenizer_files[] = {vocab, merges};
  TokenStream stream = tokenize_files(files, tokenizer, tokenizer_files, root ? out / kCacheDir : fs::path());
  const auto split = split_train_val(stream.tokens, options.val_fraction);
  // Each optimizer step reads K global micro-batches of B x ranks windows; rank r takes rows
  // [r B, (r + 1) B) of each, so the run reads the windows one process with --batch B x ranks would.
  const int B = options.batch, T = options.seq, K = options.accum;
  WindowSampler sampler(split.train, T, B * world.size, K, options.order, options.seed);
  if (options.val_fraction > 0 && window_count(static_cast<std::int64_t>(split.val.size()), T) == 0)
    throw ValueError(str("the held-out text (--val-fraction ", options.val_fraction, ") is ", split.val.size(),
                         " tokens, shorter than one window of --seq ", T, " + 1 tokens"));
  const std::int64_t windows_per_step = static_cast<std::int64_t>(B) * world.size * K;
  const std::int64_t total_steps =
      options.steps > 0 ? options.steps
                        : std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(
                                                        options.epochs * static_cast<double>(sampler.windows()) /
                                                        static_cast<double>(windows_per_step))));
  options.schedule.total_steps = total_steps;
  const std::uint64_t train_hash = hash_tokens(split.train);

  dist::Fingerprint fingerprint;
  if (world.size > 1)
    fingerprint = {hash_text(trajectory_text(options, world.size) +
                             str(" steps ", total_steps, " eval ", options.eval_every, " save ", options.save_every,
                                 " resume ", options.resume)),
                   train_hash ^ hash_tokens(split.val) ^ static_cast<std::uint64_t>(split.train.size()),
                   hash_text(config.to_json("float32"))};
  return Plan{.started = started,
              .source = source,
              .out = out,
              .options = std::move(options),
              .world = world,
              .root = root,
              .vocab = vocab,
              .merges = merges,
              .created = std::move(created),
              .stream = std::move(stream),
              .split = split,
              .sampler = std::move(sampler),
              .B = B,
              .T = T,
              .K = K,
              .first_row = B * world.rank,
              .windows_per_step = windows_per_step,
              .total_steps = total_steps,
              .train_hash = train_hash,
              .fingerprint = fingerprint};
}

}  // namespace kael::train
