// The GPT-2 model: configuration, weights loaded from a safetensors checkpoint, and the
// forward pass with a KV cache (docs/behaviour.md, "The GPT-2 checkpoint" and "The forward pass").
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kael/core/tensor.hpp"
#include "kael/core/thread_busy.hpp"

namespace kael::model {

// Largest config.json read (Error past it): GPT-2's is under 1 KiB.
inline constexpr std::uint64_t kMaxConfigBytes = 1 << 20;

struct Config {
  int n_layer = 12;
  int n_head = 12;
  int n_embd = 768;
  int n_positions = 1024;
  int vocab_size = 50257;
  float layer_norm_epsilon = 1e-5f;
  int n_inner = 0;                 // MLP width; 0 means 4 * n_embd (config.json's null)
  bool tie_word_embeddings = true;  // false: the output head is lm_head.weight, not wte

  int head_dim() const { return n_embd / n_head; }
  int mlp_dim() const { return n_inner > 0 ? n_inner : 4 * n_embd; }
  // ValueError unless every size is positive, n_embd divides into n_head heads, eps is
  // positive and the sizes are within what kael can allocate and index. `source` starts the message.
  void validate(std::string_view source = "config") const;

  // Parses config.json text; `source` names it in messages. Absent keys keep GPT-2 small's
  // values. ValueError on bad JSON or values, or on what kael does not implement (an
  // activation other than gelu_new, model_type other than gpt2, unscaled or layer-scaled
  // attention, cross-attention).
  static Config from_json(std::string_view json, std::string_view source = "config.json");
  // Reads config.json (Error when it cannot be read; ValueError as from_json).
  static Config from_json_file(const std::filesystem::path& path);
  // DIR/config.json when present, GPT-2 small defaults when not.
  static Config from_directory(const std::filesystem::path& dir);
  // config.json text for this shape, as transformers' GPT2Config writes it (gelu_new, GPT-2's
  // dropout rates and token ids), with `torch_dtype` naming the weights the file beside it holds
  // ("float32", "float16", "bfloat16"). from_json reads it back to an equal Config.
  std::string to_json(std::string_view torch_dtype) const;
};

// How the four matrices of each block and the output head are stored: f32 as in the
// checkpoint, f16 (half the bytes; activations and sums stay F32), or int8 with a scale per
// group of 32 weights (about a quarter), whose matrix products quantize the activations the
// same way and sum in int32 (kernels/int8.hpp), or bf16 (half the bytes; activations rounded
// to BF16 for each product, sums F32: AVX512-BF16, AMX tiles on the amx set; ValueError at
// load on a CPU without AVX512-BF16). On the amx set, int8 keeps one scale per output column
// instead and activations one per row, so the tiles sum whole rows of K in int32
// (kernels/amx.hpp). Converted at load from any checkpoint dtype. The token embeddings of a
// tied model are read from the narrow head.
using kael::WeightDType;  // kael/core/dtype.hpp

// "f32", "f16", "int8", "bf16"; nullopt for anything else.
std::optional<WeightDType> weight_dtype_from_name(std::string_view name);
const char* weight_dtype_name(WeightDType dtype);
// ValueError naming the choices unless `name` is one of them.
WeightDType parse_weight_dtype(std::string_view name);

struct LoadOptions {
  // Map model.safetensors (see kael::io::LoadOptions) so F32 weights are used in place. The
  // file is read instead, mmap or not, when mapping cannot save memory: data misaligned for
  // floats (as in the published gpt2 file) or mostly F16/BF16 weights, which are converted.
  bool mmap = true;
  WeightDType dtype = WeightDType::f32;  // weight storage, see WeightDType
};

class Session;

// Memory for KV caches, in blocks that sessions take as their sequences grow and give back
// when reset or destroyed: a block holds block_positions() consecutive positions of one
// sequence, keys and values of every layer. At most total_blocks() blocks exist; each is
// allocated on first use and then reused. Safe to share between threads.
class KvPool {
 public:
  static constexpr std::int64_t kBlockPositions = 32;  // block_positions()
  struct Impl;
  explicit KvPool(std::unique_ptr<Impl> impl);
  ~KvPool();
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  std::int64_t block_positions() const;
  std::int64_t block_bytes() const;
  std::int64_t total_blocks() const;
  std::int64_t used_blocks() const;  // held by sessions
  std::int64_t free_blocks() const { return total_blocks() - used_blocks(); }
  // Blocks a sequence of `positions` positions holds.
  std::int64_t blocks_for(std::int64_t positions) const;

  // Prefix caching (off until set): full blocks of prompts that sessions publish stay in the
  // pool after their sessions let go, up to `n` of them no session holds (the least recently
  // used are dropped first, and before any held block is touched when the pool runs short),
  // so that a later session whose prompt starts with the same tokens attaches them instead
  // of computing them again. A block is shared only once full, and nothing writes a full
  // block, so sharing never changes what a session holds. 0 turns caching off and drops
  // every cached block no session holds. ValueError for n < 0.
  void set_prefix_cache_blocks(std::int64_t n);
  std::int64_t cached_blocks() const;  // blocks in the prefix cache, held or not
  Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Threads the forward pass computes on, the calling thread included; n <= 0 means one per
// physical core (the default). Results do not depend on it. Call it between forward passes.
// A request above max_threads() (4 per hardware thread) is capped to it.
void set_num_threads(int n);
int num_threads();
int max_threads();
// What to tell a user who asked for `requested` threads: "" when it is within max_threads(),
// else a warning saying it was capped (callers print it; the library does not).
std::string threads_cap_warning(int requested);
// Whether the thread pool counts each thread's CPU time (ThreadBusy, into the profile's
// threads_* below). Off by default; a counted parallel call reads the thread clock twice per
// thread. Call it between forward passes.
void count_thread_busy(bool on);

// The instruction set the kernels run on: "amx", "avx512", "avx2" or "scalar", the best this
// CPU, its OS and this build support; the environment variable KAEL_ISA=scalar|avx2|avx512|amx
// forces one (an error when it is not supported).
const char* kernel_isa();
// The int8 byte dot product (--dtype int8): "avx512-vnni", "avx-vnni", "pmaddubsw" or "scalar"
// (KAEL_VNNI=0 hides VNNI, so pmaddubsw runs).
const char* int8_dot();

// Where the time of forward passes went, in milliseconds, summed over the calls made while a
// session points at it (Session::set_profile). The parts: attention (QKV projection, cache
// update, attention, output projection and residual), mlp (both layers, GELU, residual),
// layer_norm (ln_1, ln_2 and ln_f), logits (the output head); other is the rest (embedding,
// bookkeeping). Profiling costs a clock read per part and layer. With count_thread_busy(true)
// each part also gets the thread pool's counts for the calls it made.
struct ForwardProfile {
  double attention_ms = 0;
  double mlp_ms = 0;
  double layer_norm_ms = 0;
  double logits_ms = 0;
  double total_ms = 0;
  double other_ms() const { return total_ms - attention_ms - mlp_ms - layer_norm_ms - logits_ms; }
  ThreadBusy attention_threads, mlp_threads, layer_norm_threads, logits_threads, other_threads;
};

class GPT2 {
 public:
  // Loads DIR/model.safetensors with DIR/config.json (if present).
  // Parameters are matched by their Hugging Face names, with or without the "transformer."
  // prefix; the causal-mask buffers (attn.bias, attn.masked_bias) and a tied lm_head.weight
  // are ignored; F16, BF16 and F64 are converted to F32. Error for a missing parameter,
  // ValueError for a wrong shape (expected vs found) or an unexpected tensor, TypeError for a
  // non-floating dtype. Nothing is kept from a load that fails.
  static GPT2 load(const std::filesystem::path& dir, const LoadOptions& options = {});
  // The same from tensors already in memory (named as in a checkpoint file); `source` names
  // them in messages. F32 tensors are used in place, without a copy.
  static GPT2 from_tensors(const Config& config, std::map<std::string, Tensor> tensors,
                           std::string_view source = "checkpoint", WeightDType dtype = WeightDType::f32);
  GPT2(GPT2&&) noexcept;
  GPT2& operator=(GPT2&&) noexcept;
  ~GPT2();

  const Config& config() const;
  // Parameters held (the tied head counted once): 124,439,808 for GPT-2 small.
  std::int64_t parameter_count() const;

  // A new sequence state (scratch buffers, and a KV cache of up to n_positions tokens in a
  // pool of its own that holds one full context).
  Session new_session() const;
  // The same, taking its KV blocks from `pool` (shared with other sessions; ValueError for a
  // pool made by another model). A forward call that needs a block when the pool has none
  // free throws Error and changes nothing; Session::reserve takes them ahead of time.
  Session new_session(std::shared_ptr<KvPool> pool) const;
  // A pool of at most `max_blocks` blocks (ValueError unless >= 1). KvPool::blocks_for
  // (n_positions) blocks hold one full context.
  std::shared_ptr<KvPool> new_kv_pool(std::int64_t max_blocks) const;

  // Feeds `tokens` at the session's next positions, appending them to its KV cache, and
  // returns the logits of the last of them ([vocab_size], valid until the next call).
  // ValueError when the sequence would pass n_positions (the message gives the counts);
  // IndexError on an id outside the vocabulary. Nothing changes when it throws. Calls with
  // different sessions may run on several threads at once.
  std::span<const float> forward(Session& session, std::span<const std::int32_t> tokens) const;

  // Like forward(), but fills `out` ((tokens.size(), vocab_size), row-major) with the logits
  // of every new position, row t being those that follow tokens[t]: scoring a whole text takes
  // one pass instead of one per prefix. Each row equals what forward() returns after that token
  // up to float rounding (a many-row product may sum in another order). ValueError when `out`
  // has another size; otherwise it throws as forward() does, and nothing changes when it throws.
  void forward_all_logits(Session& session, std::span<const std::int32_t> tokens, std::span<float> out) const;

  // Batched decoding: feeds tokens[i] to sessions[i], each at its own next position with its
  // own cache, in one pass (each weight is read once for the whole batch), and returns each
  // session's logits ([vocab_size], valid until that session's next call). Equal, bit for
  // bit, to calling forward(*sessions[i], {tokens[i]}) for each i. ValueError for an empty
  // batch, sizes that differ, a session given twice or made by another model, or a session at
  // n_positions (with the counts); IndexError on an id outside the vocabulary. Nothing
  // changes when it throws. Calls are serialized (they share one batch workspace).
  std::vector<std::span<const float>> forward_batch(std::span<Session* const> sessions,
                                                    std::span<const std::int32_t> tokens) const;

  // Makes `dst` hold what `src` holds (a beam forking from another): copies the used part of
  // each layer's KV cache, src.length() positions, into blocks of dst's pool, and nothing
  // beyond it (dst gives back blocks it no longer needs). ValueError for a session made by
  // another model; Error when dst's pool has too few free blocks (dst is then left empty). `dst` may be longer or
  // shorter before.
  void copy_session(Session& dst, const Session& src) const;

  struct Impl;

 private:
  explicit GPT2(std::unique_ptr<Impl> impl);
  // The checks forward() and forward_all_logits() make before anything changes.
  void check_forward(const Session& session, std::span<const std::int32_t> tokens) const;
  // from_tensors; with `owned`, the tensors are known to be this load's alone, so weights are
  // laid out for the kernels in their own memory instead of a copy.
  static GPT2 build(const Config& config, std::map<std::string, Tensor> tensors, std::string_view source,
                    bool owned, WeightDType dtype);
  std::unique_ptr<Impl> impl_;
};

// One sequence's state: its KV cache and the number of positions it holds.
class Session {
 public:
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();
  int length() const;  // positions already in the cache
  void reset();        // forget every position and give the KV blocks back to the pool
  // Takes now the blocks `positions` positions need (counting those held), so that forward
  // calls up to that length never find the pool empty. False, taking nothing, when the pool
  // has too few free blocks. Positions beyond n_positions are not counted.
  bool reserve(int positions);
  // Prefix caching (KvPool::set_prefix_cache_blocks): an empty session takes the pool's cached
  // blocks for the longest prefix of `tokens` held in whole blocks, leaving at least the last
  // token to compute (its logits are needed), and returns the positions it now holds (0 when
  // none match or the session is not empty). The logits of the rest, computed after them,
  // equal those of computing every token, bit for bit.
  int attach_prefix(std::span<const std::int32_t> tokens);
  // Offers the blocks of the session's first tokens.size() positions, which must be those
  // tokens (its computed prompt), to the prefix cache; only full blocks are kept.
  void publish_prefix(std::span<const std::int32_t> tokens);
  // Adds the time of this session's later forward passes to *profile (null: stop). A batched
  // step is added once to each distinct profile of its sessions. The profile must outlive
  // its use.
  void set_profile(ForwardProfile* profile);

  struct State;

 private:
  friend class GPT2;
  explicit Session(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace kael::model
