#include "train/run/directory_swap.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "io/atomic_write.hpp"
#include "kael/core/error.hpp"

namespace kael::train {

namespace fs = std::filesystem;

namespace {

fs::path parent_of(const fs::path& path) {
  const fs::path parent = fs::absolute(path).lexically_normal().parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

// The target's name, so "out/" and "out" name the same directory.
std::string leaf_of(const fs::path& path) {
  fs::path normal = path.lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();
  return normal.filename().string();
}

// The staging name's prefix: ".NAME.tmp-".
std::string staging_prefix(const fs::path& target) {
  std::string prefix = ".";  // hidden; built piece by piece, which keeps GCC 12's -Wrestrict quiet
  prefix += leaf_of(target);
  prefix += ".tmp-";
  return prefix;
}

}  // namespace

void remove_stale_staging(const fs::path& target) {
  const std::string prefix = staging_prefix(target);
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(parent_of(target), error)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(prefix) && name.size() == prefix.size() + 6 && entry.is_directory()) fs::remove_all(entry.path(), error);
  }
}

StagingDirectory::StagingDirectory(const fs::path& target)
    : target_(parent_of(target) / leaf_of(target)) {
  std::string name = (target_.parent_path() / (staging_prefix(target) + "XXXXXX")).string();
  if (::mkdtemp(name.data()) == nullptr)
    throw Error(str("cannot create a directory beside '", target.string(), "': ", std::strerror(errno)));
  path_ = name;
  // mkdtemp makes it 0700; a model directory gets the permissions mkdir would give it.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::chmod(path_.c_str(), 0777 & ~mask);
}

StagingDirectory::~StagingDirectory() {
  if (committed_) return;
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

void StagingDirectory::write_file(std::string_view name, std::span<const std::byte> bytes) const {
  io::write_atomically(path_ / name, {bytes});
}

void StagingDirectory::commit(std::span<const std::string_view> carried) {
  io::sync_directory(path_);
  std::error_code error;
  const bool replacing = fs::exists(target_, error);
  if (replacing) {
    for (const std::string_view name : carried)
      if (fs::exists(target_ / name, error)) fs::rename(target_ / name, path_ / name, error);
    if (::renameat2(AT_FDCWD, path_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) != 0) {
      const int saved = errno;
      for (const std::string_view name : carried)  // give the caches back
        if (fs::exists(path_ / name, error)) fs::rename(path_ / name, target_ / name, error);
      throw Error(str("cannot replace '", target_.string(), "': ", std::strerror(saved)));
    }
  } else if (::rename(path_.c_str(), target_.c_str()) != 0) {
    throw Error(str("cannot create '", target_.string(), "': ", std::strerror(errno)));
  }
  committed_ = true;
  io::sync_directory(target_.parent_path());
  if (replacing) fs::remove_all(path_, error);  // the old checkpoint, now under the staging name
}

}  // namespace kael::train
