// Internal to src/train: what a checkpoint directory holds and how it is written and read back
// (the layout is described in kael/train/run.hpp).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "kael/model/gpt2.hpp"
#include "kael/optim/adam.hpp"
#include "train/net/gpt_net.hpp"

namespace kael::train {

inline constexpr const char* kStateFile = "training_state.json";
inline constexpr const char* kOptimizerFile = "optimizer.safetensors";
inline constexpr const char* kCacheDir = ".kael-train";

// What OUT is before a run: absent, an empty directory (or only the token cache), a training run
// of kael's (it has training_state.json), a model directory without one, or something else
// (a file, or a directory with other contents).
enum class OutKind { absent, empty, run, model, other };
OutKind inspect_out(const std::filesystem::path& out);

struct CheckpointText {
  std::string config_json;      // OUT/config.json (torch_dtype float32: checkpoints hold F32 weights)
  std::string vocab_json;       // OUT/vocab.json
  std::string merges_txt;       // OUT/merges.txt
  std::string state_json;       // OUT/training_state.json
};

// Writes the whole checkpoint into a staging directory beside OUT and swaps it in (the token
// cache is carried over): the weights in GPT-2's names and layout, and AdamW's moments as
// "exp_avg.<name>" / "exp_avg_sq.<name>" in the same layout (zeros before the first step).
// ValueError, before anything is written, when a parameter is not finite (naming it); Error on
// I/O failure. Either way OUT keeps its previous checkpoint.
void save_checkpoint(const std::filesystem::path& out, GptNet& model, const optim::AdamW& adamw,
                     const CheckpointText& text);

// AdamW's moments from OUT/optimizer.safetensors, one pair per parameter in model.parameters()
// order, in nn::GPT's layout. ValueError when a moment is missing or has the wrong shape.
struct ParameterMoments {
  Tensor exp_avg, exp_avg_sq;
};
std::vector<ParameterMoments> load_moments(const std::filesystem::path& out, const GptNet& model);
// Zeroed moments of model's parameters (what load_moments fills), for the ranks that receive them.
std::vector<ParameterMoments> zero_moments(const GptNet& model);

// Sets adamw's state to `moments` after `steps` steps of every parameter (nothing with 0 steps).
void set_adamw_state(optim::AdamW& adamw, const GptNet& model, const std::vector<ParameterMoments>& moments,
                     std::int64_t steps);

}  // namespace kael::train
