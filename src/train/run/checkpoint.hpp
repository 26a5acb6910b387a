// Internal to src/train: what a checkpoint directory holds and how it is written and read back
// (the layout is described in kael/train/run.hpp).
#pragma once

#include <filesystem>
#include <string>

#include "kael/model/gpt2.hpp"
#include "kael/train/adamw.hpp"
#include "kael/train/gpt2_train.hpp"

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
// cache is carried over). ValueError, before anything is written, when a parameter is not
// finite (naming it); Error on I/O failure. Either way OUT keeps its previous checkpoint.
void save_checkpoint(const std::filesystem::path& out, const TrainableGPT2& model, AdamW& adamw,
                     const CheckpointText& text);

// Restores AdamW's moments from OUT/optimizer.safetensors (the step count is the caller's).
// ValueError when a moment is missing or has the wrong shape.
void load_optimizer(const std::filesystem::path& out, const TrainableGPT2& model, AdamW& adamw);

}  // namespace kael::train
