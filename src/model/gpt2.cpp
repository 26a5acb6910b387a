// GPT2 and Session: loading, validation of forward() calls, and the chunk loop.
#include "kael/model/gpt2.hpp"

#include <algorithm>
#include <mutex>
#include <new>

#include "kael/core/error.hpp"
#include "kael/io/safetensors.hpp"
#include "kernels/attention.hpp"
#include "kernels/dispatch/cpu_features.hpp"
#include "kernels/int8.hpp"
#include "kernels/infra/thread_pool.hpp"
#include "model/forward.hpp"
#include "model/state.hpp"
#include "model/weights.hpp"

namespace kael::model {

struct GPT2::Impl {
  Config config;
  Weights weights;
  std::mutex batch_mutex;  // forward_batch calls share the workspace
  BatchWorkspace batch;
};

Session::State::State(const void* owner_, const Config& c, std::shared_ptr<KvPool> pool_)
    : owner(owner_),
      max_blocks(pool_->blocks_for(c.n_positions)),
      pool(std::move(pool_)),
      x(kChunk * c.n_embd),
      ln(kChunk * c.n_embd),
      qkv(kChunk * 3 * c.n_embd),
      att(kChunk * c.n_embd),
      fc(kChunk * c.mlp_dim()),
      scores(kChunk * c.n_head * std::int64_t{c.n_positions}),
      logits(c.vocab_size) {
  blocks.reserve(static_cast<std::size_t>(max_blocks));  // growing never reallocates the table
}

Session::State::~State() { shrink_to_blocks(0); }

bool Session::State::grow_to(std::int64_t positions) {
  const std::int64_t want = std::min(max_blocks, pool->blocks_for(positions));
  const std::int64_t have = static_cast<std::int64_t>(blocks.size());
  return want <= have || pool->impl().allocate(want - have, blocks);
}

void Session::State::shrink_to_blocks(std::int64_t keep) {
  const auto n = static_cast<std::int64_t>(blocks.size());
  if (keep >= n) return;
  pool->impl().release(blocks.data() + keep, n - keep);
  blocks.resize(static_cast<std::size_t>(keep));
}

namespace {

// Error for a forward call whose session needs blocks the pool does not have.
[[noreturn]] void throw_pool_full(const Session::State& state, std::int64_t positions, std::string_view what) {
  throw Error(str(what, ": the KV pool is full (", state.pool->used_blocks(), " of ", state.pool->total_blocks(),
                  " blocks of ", kBlockPositions, " positions in use; this sequence needs ",
                  state.pool->blocks_for(positions), " for ", positions, " positions)"));
}

}  // namespace

std::optional<WeightDType> weight_dtype_from_name(std::string_view name) {
  if (name == "f32") return WeightDType::f32;
  if (name == "f16") return WeightDType::f16;
  if (name == "int8") return WeightDType::int8;
  if (name == "bf16") return WeightDType::bf16;
  return std::nullopt;
}

const char* weight_dtype_name(WeightDType dtype) {
  switch (dtype) {
    case WeightDType::f16: return "f16";
    case WeightDType::int8: return "int8";
    case WeightDType::bf16: return "bf16";
    default: return "f32";
  }
}

WeightDType parse_weight_dtype(std::string_view name) {
  if (const auto dtype = weight_dtype_from_name(name)) return *dtype;
  throw ValueError(str("unknown dtype '", name, "' (choices: f32, f16, int8, bf16)"));
}

void set_num_threads(int n) { kernels::set_num_threads(n); }
int num_threads() { return kernels::num_threads(); }
void count_thread_busy(bool on) { kernels::count_thread_busy(on); }
int max_threads() { return kernels::max_threads(); }

std::string threads_cap_warning(int requested) {
  if (requested <= max_threads()) return {};
  return str("warning: --threads ", requested, " is more than ", max_threads(), " (", kernels::kMaxThreadsPerCpu,
             " per CPU); using ", max_threads());
}
const char* kernel_isa() { return kernels::isa_name(kernels::active_isa()); }
const char* int8_dot() { return kernels::int8_dot_name(); }

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
  // Anything there that is not a regular file is refused by the reader, with what it is.
  if (!std::filesystem::exists(std::filesystem::symlink_status(file, ec)))
    throw Error(str("no model.safetensors in '", dir.string(), "' (looked for '", file.string(), "')"));
  const bool has_config = std::filesystem::exists(std::filesystem::symlink_status(dir / "config.json", ec));
  const Config config = Config::from_directory(dir);
  io::LoadOptions io_options;
  io_options.mmap = options.mmap && mapping_pays_off(io::read_safetensors_header(file));
  io::SafetensorsFile checkpoint = io::read_safetensors(file, io_options);
  // The tensors were just read or mapped privately for this model: no one else sees them.
  try {
    return build(config, std::move(checkpoint.tensors), str("'", file.string(), "'"), true, options.dtype);
  } catch (const ValueError& e) {
    if (has_config) throw;
    throw ValueError(str(e.what(), " (there is no config.json in '", dir.string(),
                         "', so GPT-2 small's configuration was assumed)"));
  }
}

GPT2 GPT2::from_tensors(const Config& config, std::map<std::string, Tensor> tensors, std::string_view source,
                        WeightDType dtype) {
  return build(config, std::move(tensors), source, false, dtype);
}

GPT2 GPT2::build(const Config& config, std::map<std::string, Tensor> tensors, std::string_view source, bool owned,
                 WeightDType dtype) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->weights = load_weights(config, std::move(tensors), source, owned, dtype);
  return GPT2(std::move(impl));
}

const Config& GPT2::config() const { return impl_->config; }

std::int64_t GPT2::parameter_count() const { return impl_->weights.parameter_count; }

std::shared_ptr<KvPool> GPT2::new_kv_pool(std::int64_t max_blocks) const {
  return std::make_shared<KvPool>(std::make_unique<KvPool::Impl>(impl_.get(), impl_->config, max_blocks));
}

Session GPT2::new_session() const {
  const Config& c = impl_->config;
  return new_session(new_kv_pool((c.n_positions + kBlockPositions - 1) / kBlockPositions));
}

Session GPT2::new_session(std::shared_ptr<KvPool> pool) const {
  if (!pool) throw ValueError("new_session: no KV pool given");
  if (pool->impl().owner != impl_.get()) throw ValueError("new_session: the KV pool was made by a different model");
  try {
    return Session(std::make_unique<Session::State>(impl_.get(), impl_->config, std::move(pool)));
  } catch (const std::bad_alloc&) {
    throw Error("out of memory allocating a session's activation buffers");
  }
}

void GPT2::check_forward(const Session& session, std::span<const std::int32_t> tokens) const {
  const Config& config = impl_->config;
  const Session::State& state = *session.state_;
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
}

std::span<const float> GPT2::forward(Session& session, std::span<const std::int32_t> tokens) const {
  check_forward(session, tokens);
  const Config& config = impl_->config;
  Session::State& state = *session.state_;
  const std::int64_t positions = state.length + static_cast<std::int64_t>(tokens.size());
  if (!state.grow_to(positions)) throw_pool_full(state, positions, "forward");
  for (std::size_t begin = 0; begin < tokens.size(); begin += kChunk) {
    const std::size_t count = std::min<std::size_t>(kChunk, tokens.size() - begin);
    const bool last = begin + count == tokens.size();
    forward_chunk(config, impl_->weights, state, tokens.data() + begin, static_cast<std::int64_t>(count), last);
  }
  return {state.logits.get(), static_cast<std::size_t>(config.vocab_size)};
}

void GPT2::forward_all_logits(Session& session, std::span<const std::int32_t> tokens, std::span<float> out) const {
  check_forward(session, tokens);
  const Config& config = impl_->config;
  const auto V = static_cast<std::size_t>(config.vocab_size);
  if (out.size() != tokens.size() * V)
    throw ValueError(str("forward_all_logits: the output holds ", out.size(), " floats, ", tokens.size(), " tokens x ",
                         V, " logits need ", tokens.size() * V));
  Session::State& state = *session.state_;
  const std::int64_t positions = state.length + static_cast<std::int64_t>(tokens.size());
  if (!state.grow_to(positions)) throw_pool_full(state, positions, "forward_all_logits");
  for (std::size_t begin = 0; begin < tokens.size(); begin += kChunk) {
    const std::size_t count = std::min<std::size_t>(kChunk, tokens.size() - begin);
    forward_chunk(config, impl_->weights, state, tokens.data() + begin, static_cast<std::int64_t>(count), false,
                  out.data() + begin * V);
  }
  // The session's logits follow the last token, as after forward().
  std::copy(out.end() - static_cast<std::ptrdiff_t>(V), out.end(), state.logits.get());
}

std::vector<std::span<const float>> GPT2::forward_batch(std::span<Session* const> sessions,
                                                        std::span<const std::int32_t> tokens) const {
  const Config& config = impl_->config;
  if (sessions.empty()) throw ValueError("forward_batch: no sessions given");
  if (sessions.size() != tokens.size())
    throw ValueError(str("forward_batch: ", sessions.size(), " sessions but ", tokens.size(), " tokens (one each)"));
  // Everything is checked before any session changes.
  std::vector<Session::State*> states;
  std::vector<ForwardProfile*> profiles;
  states.reserve(sessions.size());
  for (std::size_t i = 0; i < sessions.size(); ++i) {
    if (sessions[i] == nullptr) throw ValueError(str("forward_batch: session ", i, " is null"));
    Session::State* state = sessions[i]->state_.get();
    if (state->owner != impl_.get())
      throw ValueError(str("forward_batch: session ", i, " was made by a different model"));
    if (std::find(states.begin(), states.end(), state) != states.end())
      throw ValueError(str("forward_batch: session ", i, " appears twice in the batch"));
    if (state->length + 1 > config.n_positions)
      throw ValueError(str("forward_batch: session ", i, ": sequence of ", state->length + 1, " tokens (",
                           state->length, " cached + 1 new) exceeds the model's context of n_positions = ",
                           config.n_positions));
    if (tokens[i] < 0 || tokens[i] >= config.vocab_size)
      throw IndexError(str("forward_batch: token id ", tokens[i], " for session ", i,
                           " is outside the vocabulary [0, ", config.vocab_size, ")"));
    states.push_back(state);
    if (state->profile && std::find(profiles.begin(), profiles.end(), state->profile) == profiles.end())
      profiles.push_back(state->profile);
  }

  // A session at a block boundary takes its next block; if one cannot, those taken go back.
  std::vector<std::int64_t> held(states.size());
  for (std::size_t i = 0; i < states.size(); ++i) {
    Session::State& state = *states[i];
    held[i] = static_cast<std::int64_t>(state.blocks.size());
    if (state.grow_to(state.length + 1)) continue;
    for (std::size_t j = 0; j < i; ++j) states[j]->shrink_to_blocks(held[j]);
    throw_pool_full(state, state.length + 1, str("forward_batch: session ", i));
  }

  const auto B = static_cast<std::int64_t>(states.size());
  {
    std::lock_guard lock(impl_->batch_mutex);
    impl_->batch.reserve(config, B);
    forward_batch_step(config, impl_->weights, impl_->batch, states.data(), tokens.data(), B, profiles);
  }
  std::vector<std::span<const float>> logits;
  logits.reserve(states.size());
  for (Session::State* state : states)
    logits.emplace_back(state->logits.get(), static_cast<std::size_t>(config.vocab_size));
  return logits;
}

Session::Session(std::unique_ptr<State> state) : state_(std::move(state)) {}
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() = default;
int Session::length() const { return state_->length; }
void Session::reset() {
  state_->length = 0;
  state_->shrink_to_blocks(0);
}
bool Session::reserve(int positions) { return state_->grow_to(positions); }
int Session::attach_prefix(std::span<const std::int32_t> tokens) {
  State& s = *state_;
  if (s.length != 0 || !s.blocks.empty() || tokens.size() < 2) return 0;
  const auto most = std::min<std::int64_t>(s.max_blocks, static_cast<std::int64_t>(tokens.size() - 1) / kBlockPositions);
  s.length = static_cast<int>(s.pool->impl().attach_prefix(tokens, most, s.blocks) * kBlockPositions);
  return s.length;
}
void Session::publish_prefix(std::span<const std::int32_t> tokens) {
  State& s = *state_;
  const auto n = std::min<std::int64_t>(s.length, static_cast<std::int64_t>(tokens.size())) / kBlockPositions;
  s.pool->impl().publish_prefix(tokens, s.blocks.data(), std::min<std::int64_t>(n, static_cast<std::int64_t>(s.blocks.size())));
}
void Session::set_profile(ForwardProfile* profile) { state_->profile = profile; }

}  // namespace kael::model
