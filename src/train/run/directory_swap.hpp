// Internal to src/train: replacing a whole directory so that readers see the old one or the new
// one, never a mix (the checkpoint directory, see kael/train/run.hpp).
#pragma once

#include <filesystem>
#include <span>
#include <string_view>

namespace kael::train {

// A new empty directory beside `target` (".NAME.tmp-XXXXXX" in the same parent, hence the same
// file system), removed with its contents on destruction unless commit() moved it into place.
class StagingDirectory {
 public:
  explicit StagingDirectory(const std::filesystem::path& target);
  ~StagingDirectory();
  StagingDirectory(const StagingDirectory&) = delete;
  StagingDirectory& operator=(const StagingDirectory&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Writes path()/name (fsynced) from bytes.
  void write_file(std::string_view name, std::span<const std::byte> bytes) const;
  // Fsyncs the staged directory and puts it at the target: swapped with the existing target in
  // one rename (RENAME_EXCHANGE, the old one then removed) or renamed into place when there is
  // none; then fsyncs the parent. Subdirectories named in `carried` move from the old target
  // into the new one first (they are caches: a crash may lose them, never the checkpoint).
  // Error on failure, the old target intact.
  void commit(std::span<const std::string_view> carried = {});

 private:
  std::filesystem::path target_, path_;
  bool committed_ = false;
};

// Removes staging directories of `target` that a killed process left behind.
void remove_stale_staging(const std::filesystem::path& target);

// Fsyncs a directory (its entries, after a rename or a new file). Error on failure.
void sync_directory(const std::filesystem::path& directory);

}  // namespace kael::train
