// Internal to src/train: what a run may do to its --out before it trains (refuse it, or create
// it), and the clean-up of an OUT the run created and never saved into.
#pragma once

#include <filesystem>

#include "kael/train/run.hpp"

namespace kael::train {

// Refuses an OUT this run must not touch, makes sure a checkpoint can be written beside it, and
// creates it (with its token cache directory) when absent; true when it created it.
bool prepare_out(const std::filesystem::path& out, const RunOptions& options);

// Removes an OUT this run created when the run ends with no checkpoint in it (an error before the
// first save), so a refused run leaves nothing behind. Move-only: the last owner cleans up.
class CreatedOut {
 public:
  CreatedOut(std::filesystem::path path, bool created) : path_(std::move(path)), created_(created) {}
  CreatedOut(CreatedOut&& other) noexcept : path_(std::move(other.path_)), created_(other.created_) {
    other.created_ = false;
  }
  CreatedOut(const CreatedOut&) = delete;
  CreatedOut& operator=(const CreatedOut&) = delete;
  CreatedOut& operator=(CreatedOut&&) = delete;
  ~CreatedOut();

 private:
  std::filesystem::path path_;
  bool created_ = false;
};

}  // namespace kael::train
