// A character-level GPT trained from scratch on the King James Bible with kael's tensor library:
// kael::nn::GPT (vocabulary = the characters of the text), kael::optim::AdamW, a checkpoint
// written with kael::io::save_safetensors, loaded back into a fresh model and sampled.
//
//   apt-get install bible-kjv && scripts/kjv_text.py build/kjv-text     # the text, one file per book
//   cmake -S . -B build -DKAEL_BUILD_EXAMPLES=ON && cmake --build build --target char_gpt
//   build/examples/char_gpt --data build/kjv-text --seconds 540
//
// It prints the curve (step, training loss, validation loss on the last verses, seconds since
// start), then the reloaded model's validation loss, which must equal the trained one's, and a
// sample. The defaults reach a validation loss below 1.8 nats per character within 10 minutes
// on two cores (docs/nn.md, "The char-level GPT"). examples/char_gpt.py is the same program in
// Python. Against an installed kael: cmake -S examples -B build-ex -DCMAKE_PREFIX_PATH=PREFIX.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <numbers>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kael/kael.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string data = "build/kjv-text";
  std::int64_t steps = 0;     // 0: no step limit
  double seconds = 540;       // wall-time budget of the training loop; 0: none
  std::int64_t batch = 8;
  std::int64_t context = 64;
  std::int64_t layers = 2;
  std::int64_t width = 128;
  std::int64_t heads = 4;
  double lr = 6e-3;
  double weight_decay = 0.1;
  std::int64_t warmup = 50;
  double val_fraction = 0.05;
  std::int64_t eval_every = 100;
  std::int64_t eval_batches = 16;
  std::uint64_t seed = 1;
  std::string out = "build/char_gpt.safetensors";
  std::int64_t sample_tokens = 400;
  std::string prompt = "And God said";
  double temperature = 0.8;
  int threads = 0;
};

// ---- text: UTF-8 <-> code points, so that a "character" is one Unicode character ----

std::vector<char32_t> decode_utf8(const std::string& bytes) {
  std::vector<char32_t> out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    const int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > bytes.size())
      throw std::runtime_error("the text is not valid UTF-8 (byte " + std::to_string(i) + ")");
    char32_t c = n == 1 ? b : b & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const auto cont = static_cast<unsigned char>(bytes[i + k]);
      if ((cont >> 6) != 2)
        throw std::runtime_error("the text is not valid UTF-8 (byte " + std::to_string(i + k) + ")");
      c = (c << 6) | (cont & 0x3F);
    }
    out.push_back(c);
    i += n;
  }
  return out;
}

std::string encode_utf8(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A file, or the .txt files of a directory concatenated in name order (the books in canonical
// order, as scripts/kjv_text.py numbers them).
std::string read_text(const fs::path& path) {
  if (!fs::exists(path))
    throw std::runtime_error(path.string() + " does not exist (make the KJV text with scripts/kjv_text.py " +
                             path.string() + ")");
  if (!fs::is_directory(path)) return read_file(path);
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(path))
    if (entry.is_regular_file() && entry.path().extension() == ".txt") files.push_back(entry.path());
  if (files.empty()) throw std::runtime_error("no .txt files in " + path.string());
  std::sort(files.begin(), files.end());
  std::string text;
  for (const auto& file : files) text += read_file(file);
  return text;
}

// The vocabulary: the distinct characters of the text in code point order; ids are positions.
struct Vocab {
  std::vector<char32_t> chars;
  std::map<char32_t, std::int64_t> ids;

  explicit Vocab(std::vector<char32_t> distinct) : chars(std::move(distinct)) {
    for (std::size_t i = 0; i < chars.size(); ++i) ids[chars[i]] = static_cast<std::int64_t>(i);
  }
  std::string as_string() const {
    std::string s;
    for (const char32_t c : chars) s += encode_utf8(c);
    return s;
  }
  std::vector<std::int64_t> encode(const std::vector<char32_t>& text) const {
    std::vector<std::int64_t> out;
    out.reserve(text.size());
    for (const char32_t c : text) {
      const auto it = ids.find(c);
      if (it == ids.end()) {
        char code[16];
        std::snprintf(code, sizeof code, "U+%04X", static_cast<unsigned>(c));
        throw std::runtime_error(std::string("character ") + code + " is not in the vocabulary");
      }
      out.push_back(it->second);
    }
    return out;
  }
  std::string decode(const std::vector<std::int64_t>& tokens) const {
    std::string s;
    for (const std::int64_t t : tokens) s += encode_utf8(chars.at(static_cast<std::size_t>(t)));
    return s;
  }
};

// ---- batches and losses ----

struct Batch {
  kael::Tensor x, y;  // (B, T) ids and the ids one position later
};

Batch make_batch(const std::vector<std::int64_t>& data, const std::vector<std::int64_t>& starts, std::int64_t T) {
  std::vector<std::int64_t> x, y;
  for (const std::int64_t start : starts) {
    x.insert(x.end(), data.begin() + start, data.begin() + start + T);
    y.insert(y.end(), data.begin() + start + 1, data.begin() + start + T + 1);
  }
  const auto B = static_cast<std::int64_t>(starts.size());
  return {kael::from_vector(x, {B, T}), kael::from_vector(y, {B, T})};
}

kael::Tensor loss_of(kael::nn::GPT& model, const Batch& batch) {
  const kael::Tensor logits = model.forward(batch.x);  // (B, T, vocab)
  const std::int64_t rows = batch.x.numel();
  return kael::cross_entropy(logits.reshape({rows, logits.size(2)}), batch.y.reshape({rows}));
}

// The mean loss over fixed windows spread evenly through `data` (the same windows every time, so
// the curve's points and the reloaded model's loss are comparable), without recording a graph.
double evaluate(kael::nn::GPT& model, const std::vector<Batch>& batches) {
  const kael::autograd::NoGradGuard no_grad;
  model.eval();
  double total = 0;
  for (const Batch& batch : batches) total += loss_of(model, batch).item<float>();
  model.train();
  return total / static_cast<double>(batches.size());
}

std::vector<Batch> fixed_batches(const std::vector<std::int64_t>& data, std::int64_t count, std::int64_t B,
                                 std::int64_t T) {
  const std::int64_t windows = count * B, last = static_cast<std::int64_t>(data.size()) - T - 1;
  std::vector<Batch> batches;
  for (std::int64_t i = 0; i < count; ++i) {
    std::vector<std::int64_t> starts;
    for (std::int64_t b = 0; b < B; ++b)
      starts.push_back(windows == 1 ? 0 : (i * B + b) * last / (windows - 1));
    batches.push_back(make_batch(data, starts, T));
  }
  return batches;
}

// ---- checkpoint: the weights, with the vocabulary and the sizes as metadata ----

// GPT-2's architecture without the biases and with the exact (erf) GELU: in the tensor library
// the broadcast bias adds and tanh are slow paths, and without them a step takes a third less time.
kael::nn::GptConfig config_for(std::int64_t vocab_size, std::int64_t context, std::int64_t layers, std::int64_t heads,
                               std::int64_t width) {
  return kael::nn::GptConfig{.vocab_size = vocab_size, .n_positions = context, .n_layer = layers, .n_head = heads,
                             .n_embd = width, .dropout = 0.0, .tanh_gelu = false, .bias = false};
}

kael::io::Metadata checkpoint_metadata(const kael::nn::GptConfig& c, const Vocab& vocab) {
  return {{"vocab", vocab.as_string()},
          {"n_positions", std::to_string(c.n_positions)},
          {"n_layer", std::to_string(c.n_layer)},
          {"n_head", std::to_string(c.n_head)},
          {"n_embd", std::to_string(c.n_embd)}};
}

struct Loaded {
  std::unique_ptr<kael::nn::GPT> model;
  Vocab vocab;
};

// A fresh model built from the checkpoint alone: sizes and vocabulary from its metadata, then
// load_state_dict.
Loaded load_checkpoint(const fs::path& path) {
  const kael::io::SafetensorsFile file = kael::io::read_safetensors(path);
  const auto field = [&](const std::string& key) -> const std::string& {
    const auto it = file.metadata.find(key);
    if (it == file.metadata.end()) throw std::runtime_error(path.string() + " has no '" + key + "' metadata");
    return it->second;
  };
  std::vector<char32_t> chars = decode_utf8(field("vocab"));
  const auto size = [&](const std::string& key) { return static_cast<std::int64_t>(std::stoll(field(key))); };
  auto model = std::make_unique<kael::nn::GPT>(config_for(static_cast<std::int64_t>(chars.size()), size("n_positions"),
                                                          size("n_layer"), size("n_head"), size("n_embd")));
  model->load_state_dict(file.tensors);
  return {std::move(model), Vocab(std::move(chars))};
}

// Text after `prompt`: nn::generate within the context, then again from the last half-context
// of what is written so far, until `tokens` characters are drawn.
std::string sample(kael::nn::GPT& model, const Vocab& vocab, const std::string& prompt, std::int64_t tokens,
                   double temperature) {
  std::vector<std::int64_t> ids = vocab.encode(decode_utf8(prompt));
  if (ids.empty()) throw std::runtime_error("the prompt is empty");
  const std::int64_t context = model.config().n_positions, keep = std::max<std::int64_t>(1, context / 2);
  model.eval();
  std::vector<std::int64_t> out;
  while (static_cast<std::int64_t>(out.size()) < tokens) {
    const std::int64_t window = std::min<std::int64_t>(static_cast<std::int64_t>(ids.size()), keep);
    const std::vector<std::int64_t> last(ids.end() - window, ids.end());
    const std::int64_t n = std::min(tokens - static_cast<std::int64_t>(out.size()), context - window);
    const kael::Tensor all = kael::nn::generate(model, kael::from_vector(last, {1, window}),
                                                {.max_new_tokens = n, .temperature = temperature, .top_k = 0});
    const std::vector<std::int64_t> row = all.reshape({-1}).to_vector<std::int64_t>();
    ids.insert(ids.end(), row.begin() + window, row.end());
    out.insert(out.end(), row.begin() + window, row.end());
  }
  return prompt + vocab.decode(out);
}

// Learning rate at `progress` in [0, 1] (of the steps or of the seconds, whichever runs out
// first): a linear warmup over the first steps, then a cosine from lr down to lr / 10.
double learning_rate(const Args& args, std::int64_t step, double progress) {
  const double warm =
      std::min(1.0, static_cast<double>(step + 1) / static_cast<double>(std::max<std::int64_t>(1, args.warmup)));
  const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * std::min(1.0, progress)));
  return args.lr * warm * (0.1 + 0.9 * cosine);
}

int run(const Args& args) {
  const auto start = Clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  if (args.steps == 0 && args.seconds <= 0) throw std::runtime_error("give --steps or --seconds (or both)");
  if (args.threads > 0) kael::model::set_num_threads(args.threads);
  kael::manual_seed(args.seed);

  const std::vector<char32_t> text = decode_utf8(read_text(args.data));
  std::vector<char32_t> distinct = text;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const Vocab vocab(distinct);
  const std::vector<std::int64_t> ids = vocab.encode(text);
  // Held out: the last verses, never trained on (with the default 5% of the KJV: Colossians 1:13
  // to the end of Revelation).
  const auto n_val = static_cast<std::int64_t>(static_cast<double>(ids.size()) * args.val_fraction);
  const std::vector<std::int64_t> train_ids(ids.begin(), ids.end() - n_val), val_ids(ids.end() - n_val, ids.end());
  const std::int64_t T = args.context, B = args.batch;
  if (static_cast<std::int64_t>(val_ids.size()) < T + 1 || static_cast<std::int64_t>(train_ids.size()) < T + 1)
    throw std::runtime_error("the text (" + std::to_string(ids.size()) + " characters) is too short for a context of " +
                             std::to_string(T) + " with a " + std::to_string(args.val_fraction) +
                             " validation fraction");

  const auto vocab_size = static_cast<std::int64_t>(vocab.chars.size());
  kael::nn::GPT model(config_for(vocab_size, T, args.layers, args.heads, args.width));
  std::int64_t parameter_count = 0;
  for (const kael::Tensor& p : model.parameters()) parameter_count += p.numel();
  std::printf("text: %zu characters, %zu distinct, from %s; training on %zu, validating on the last %zu\n",
              ids.size(), vocab.chars.size(), args.data.c_str(), train_ids.size(), val_ids.size());
  std::printf("model: %lld layers, width %lld, %lld heads, context %lld, %lld parameters; batch %lld, lr %g, "
              "%d threads\n",
              static_cast<long long>(args.layers), static_cast<long long>(args.width),
              static_cast<long long>(args.heads), static_cast<long long>(T), static_cast<long long>(parameter_count),
              static_cast<long long>(B), args.lr, kael::model::num_threads());

  // Weight decay on the matrices only (as GPT-2's recipes): one optimizer per group.
  std::vector<kael::Tensor> decayed, plain;
  for (const kael::Tensor& p : model.parameters()) (p.dim() >= 2 ? decayed : plain).push_back(p);
  kael::optim::AdamW opt_decayed(decayed, {.lr = args.lr, .betas = {0.9, 0.99}, .weight_decay = args.weight_decay});
  kael::optim::AdamW opt_plain(plain, {.lr = args.lr, .betas = {0.9, 0.99}, .weight_decay = 0.0});
  const std::vector<kael::Tensor> params = model.parameters();

  const std::vector<Batch> val_batches = fixed_batches(val_ids, args.eval_batches, B, T);
  std::mt19937_64 rng(args.seed);
  std::uniform_int_distribution<std::int64_t> pick(0, static_cast<std::int64_t>(train_ids.size()) - T - 1);

  // One row of the curve: the mean training loss of the steps since the last row, the loss on
  // the fixed validation windows, the seconds since the program started.
  double loss_sum = 0, val_loss = 0;
  std::int64_t loss_count = 0, step = 0;
  const auto report = [&] {
    val_loss = evaluate(model, val_batches);
    char train[32] = "-";
    if (loss_count > 0) std::snprintf(train, sizeof train, "%.4f", loss_sum / static_cast<double>(loss_count));
    std::printf("%6lld  %10s  %8.4f  %8.1f\n", static_cast<long long>(step), train, val_loss, elapsed());
    std::fflush(stdout);
    loss_sum = 0;
    loss_count = 0;
  };
  std::printf("%6s  %10s  %8s  %8s\n", "step", "train_loss", "val_loss", "seconds");
  report();
  const double train_start = elapsed();
  for (;;) {
    const double progress = std::max(args.steps > 0 ? static_cast<double>(step) / static_cast<double>(args.steps) : 0.0,
                                     args.seconds > 0 ? (elapsed() - train_start) / args.seconds : 0.0);
    if (progress >= 1.0) break;
    const double lr = learning_rate(args, step, progress);
    opt_decayed.set_lr(lr);
    opt_plain.set_lr(lr);

    std::vector<std::int64_t> starts(static_cast<std::size_t>(B));
    for (auto& s : starts) s = pick(rng);
    const kael::Tensor loss = loss_of(model, make_batch(train_ids, starts, T));
    loss.backward();
    kael::optim::clip_grad_norm_(params, 1.0);
    opt_decayed.step();
    opt_plain.step();
    opt_decayed.zero_grad();
    opt_plain.zero_grad();
    ++step;
    loss_sum += loss.item<float>();
    ++loss_count;
    if (!std::isfinite(loss_sum))
      throw std::runtime_error("the training loss is not finite at step " + std::to_string(step) + " (lower --lr)");
    if (step % args.eval_every == 0) report();
  }
  if (loss_count > 0) report();
  std::printf("trained %lld steps in %.1f s; validation loss %.4f nats per character\n", static_cast<long long>(step),
              elapsed() - train_start, val_loss);

  const fs::path out(args.out);
  if (out.has_parent_path()) fs::create_directories(out.parent_path());
  kael::io::save_safetensors(out, model.state_dict(), checkpoint_metadata(model.config(), vocab));
  Loaded loaded = load_checkpoint(out);
  const double reloaded_loss = evaluate(*loaded.model, val_batches);
  std::printf("saved %s; reloaded into a fresh model: validation loss %.4f\n", out.c_str(), reloaded_loss);
  // Same weights, same windows, same kernels: the two losses are the same number.
  if (std::abs(reloaded_loss - val_loss) > 1e-6 || loaded.vocab.chars != vocab.chars)
    throw std::runtime_error("the reloaded model differs from the trained one (validation loss " +
                             std::to_string(reloaded_loss) + " against " + std::to_string(val_loss) + ")");

  std::printf("sample (temperature %g):\n%s\n", args.temperature,
              sample(*loaded.model, loaded.vocab, args.prompt, args.sample_tokens, args.temperature).c_str());
  std::printf("total %.1f s\n", elapsed());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app{"Train a character-level GPT on a text with kael's tensor library (kael " +
                std::string(kael::version()) + ")"};
  const auto option = [&app](const std::string& name, auto& value, const std::string& help) {
    return app.add_option(name, value, help)->capture_default_str();
  };
  option("--data", args.data, "A text file, or a directory of .txt files (read in name order)");
  option("--steps", args.steps, "Training steps (0 = until --seconds)")->check(CLI::NonNegativeNumber);
  option("--seconds", args.seconds, "Wall-time budget of the training loop (0 = until --steps)")
      ->check(CLI::NonNegativeNumber);
  option("--batch", args.batch, "Sequences per step")->check(CLI::PositiveNumber);
  option("--context", args.context, "Characters per sequence (the model's positions)")->check(CLI::PositiveNumber);
  option("--layers", args.layers, "Transformer blocks")->check(CLI::PositiveNumber);
  option("--width", args.width, "Embedding width (a multiple of --heads)")->check(CLI::PositiveNumber);
  option("--heads", args.heads, "Attention heads")->check(CLI::PositiveNumber);
  option("--lr", args.lr, "Peak learning rate (warmup, then a cosine down to a tenth)")->check(CLI::PositiveNumber);
  option("--weight-decay", args.weight_decay, "AdamW's decay of the weight matrices")->check(CLI::NonNegativeNumber);
  option("--warmup", args.warmup, "Steps of linear warmup")->check(CLI::NonNegativeNumber);
  option("--val-fraction", args.val_fraction, "Fraction of the text, at its end, held out for validation")
      ->check(CLI::Range(0.0, 0.5));
  option("--eval-every", args.eval_every, "Steps between points of the curve")->check(CLI::PositiveNumber);
  option("--eval-batches", args.eval_batches, "Batches of validation windows per point")->check(CLI::PositiveNumber);
  option("--seed", args.seed, "Random seed (initialization and batches)");
  option("--out", args.out, "Checkpoint file to write (safetensors)");
  option("--sample-tokens", args.sample_tokens, "Characters to sample after training")->check(CLI::NonNegativeNumber);
  option("--prompt", args.prompt, "Text the sample continues");
  option("--temperature", args.temperature, "Sampling temperature (0 = greedy)")->check(CLI::NonNegativeNumber);
  option("--threads", args.threads, "Compute threads (0 = one per physical core)")->check(CLI::NonNegativeNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);  // --help prints and exits 0; an unknown option or a bad value exits non-zero
  }
  try {
    return run(args);
  } catch (const std::exception& e) {
    std::cout.flush();
    std::fflush(stdout);
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
