// GPT2 and Session: loading, validation of forward() calls, and the chunk loop.
#include "kael/model/gpt2.hpp"

#include <algorithm>
#include <new>

#include "kael/core/error.hpp"
#include "kael/io/safetensors.hpp"
#include "kernels/thread_pool.hpp"
#include "model/forward.hpp"
#include "model/state.hpp"
#include "model/weights.hpp"

namespace kael::model {

struct GPT2::Impl {
  Config config;
  Weights weights;
};

Session::State::State(const void* owner_, const Config& c)
    : owner(owner_),
      k_cache(std::int64_t{c.n_layer} * c.n_positions * c.n_embd),
      v_cache(std::int64_t{c.n_layer} * c.n_positions * c.n_embd),
      x(kChunk * c.n_embd),
      ln(kChunk * c.n_embd),
      qkv(kChunk * 3 * c.n_embd),
      att(kChunk * c.n_embd),
      proj(kChunk * c.n_embd),
      fc(kChunk * c.mlp_dim()),
      scores(kChunk * c.n_head * std::int64_t{c.n_positions}),
      logits(c.vocab_size) {}

void set_num_threads(int n) { kernels::set_num_threads(n); }
int num_threads() { return kernels::num_threads(); }

GPT2::GPT2(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GPT2::GPT2(GPT2&&) noexcept = default;
GPT2& GPT2::operator=(GPT2&&) noexcept = default;
GPT2::~GPT2() = default;

namespace {

// Mapping saves memory only when the F32 weights can be used in place. When the data section
// is misaligned for floats (the published gpt2 file starts it 3 bytes past a multiple of 8),
// or most bytes are F16/BF16 to be converted, every weight would be copied out of the mapping
// anyway, and the mapped pages touched while copying would sit beside the copies: twice the
// weights at the peak. Reading instead fills owned memory directly (and frees each F16 source
// as soon as it is converted).
bool mapping_pays_off(const io::Header& header) {
  const std::uint64_t data_start = 8 + header.header_length;
  if (data_start % alignof(float) != 0) return false;
  std::uint64_t f32_bytes = 0;
  for (const io::TensorInfo& info : header.tensors)
    if (info.dtype == DType::F32) f32_bytes += info.end - info.begin;
  const std::uint64_t data_bytes = header.file_size - data_start;
  return f32_bytes * 2 >= data_bytes;
}

}  // namespace

GPT2 GPT2::load(const std::filesystem::path& dir, const LoadOptions& options) {
  const auto file = dir / "model.safetensors";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec))
    throw Error(str("no model.safetensors in '", dir.string(), "' (looked for '", file.string(), "')"));
  const Config config = Config::from_directory(dir);
  io::LoadOptions io_options;
  io_options.mmap = options.mmap && mapping_pays_off(io::read_safetensors_header(file));
  io::SafetensorsFile checkpoint = io::load_safetensors(file, io_options);
  return from_tensors(config, std::move(checkpoint.tensors), str("'", file.string(), "'"));
}

GPT2 GPT2::from_tensors(const Config& config, std::map<std::string, Tensor> tensors, std::string_view source) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->weights = load_weights(config, std::move(tensors), source);
  return GPT2(std::move(impl));
}

const Config& GPT2::config() const { return impl_->config; }

std::int64_t GPT2::parameter_count() const { return impl_->weights.parameter_count; }

Session GPT2::new_session() const {
  try {
    return Session(std::make_unique<Session::State>(impl_.get(), impl_->config));
  } catch (const std::bad_alloc&) {
    const Config& c = impl_->config;
    throw Error(str("out of memory allocating a session: its KV cache alone is ",
                    2 * std::int64_t{c.n_layer} * c.n_positions * c.n_embd * 4, " bytes"));
  }
}

std::span<const float> GPT2::forward(Session& session, std::span<const std::int32_t> tokens) const {
  const Config& config = impl_->config;
  Session::State& state = *session.state_;
  if (state.owner != impl_.get()) throw ValueError("forward: the session was made by a different model");
  if (tokens.empty()) throw ValueError("forward: no tokens given (at least one is needed for logits)");
  const std::int64_t total = std::int64_t{state.length} + static_cast<std::int64_t>(tokens.size());
  if (total > config.n_positions)
    throw ValueError(str("sequence of ", total, " tokens (", state.length, " cached + ", tokens.size(),
                         " new) exceeds the model's context of n_positions = ", config.n_positions));
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= config.vocab_size)
      throw IndexError(str("token id ", tokens[i], " at index ", i, " is outside the vocabulary [0, ",
                           config.vocab_size, ")"));

  for (std::size_t begin = 0; begin < tokens.size(); begin += kChunk) {
    const std::size_t count = std::min<std::size_t>(kChunk, tokens.size() - begin);
    const bool last = begin + count == tokens.size();
    forward_chunk(config, impl_->weights, state, tokens.data() + begin, static_cast<std::int64_t>(count), last);
  }
  return {state.logits.get(), static_cast<std::size_t>(config.vocab_size)};
}

Session::Session(std::unique_ptr<State> state) : state_(std::move(state)) {}
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() = default;
int Session::length() const { return state_->length; }
void Session::reset() { state_->length = 0; }

}  // namespace kael::model
