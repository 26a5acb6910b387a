#include "train/run/out_dir.hpp"

#include "kael/core/error.hpp"
#include "train/run/checkpoint.hpp"
#include "train/run/directory_swap.hpp"

namespace kael::train {

namespace fs = std::filesystem;

bool prepare_out(const fs::path& out, const RunOptions& options) {
  const OutKind kind = inspect_out(out);
  const std::string name = out.string();
  switch (kind) {
    case OutKind::other:
      throw ValueError(str("--out '", name, "' is not an empty directory, a model or a kael training run; refusing ",
                           "to replace it (choose another --out)"));
    case OutKind::model:
      if (options.resume) throw ValueError(str("--out '", name, "' holds a model but no training state to resume"));
      if (!options.overwrite)
        throw ValueError(str("--out '", name, "' already holds a model; pass --overwrite to replace it"));
      break;
    case OutKind::run:
      if (!options.resume && !options.overwrite)
        throw ValueError(str("--out '", name, "' already holds a training run; pass --resume to continue it or ",
                             "--overwrite to start again"));
      break;
    case OutKind::absent:
    case OutKind::empty:
      if (options.resume) throw ValueError(str("--resume: --out '", name, "' holds no training run"));
      break;
  }
  remove_stale_staging(out);
  std::error_code error;
  fs::create_directories(out / kCacheDir, error);
  if (error) throw Error(str("--out '", name, "' cannot be written: ", error.message()));
  StagingDirectory probe(out);  // a checkpoint is staged beside OUT: fails now if it cannot be
  return kind == OutKind::absent;
}

CreatedOut::~CreatedOut() {
  std::error_code ignored;
  if (created_ && inspect_out(path_) == OutKind::empty) fs::remove_all(path_, ignored);
}

}  // namespace kael::train
