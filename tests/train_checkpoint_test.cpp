// Checkpoint directories: swapped in whole, caches carried over, nothing left behind on failure,
// and what an existing --out is taken for.
#include <gtest/gtest.h>
#include <filesystem>

#include "kael/core/error.hpp"
#include "train/run/checkpoint.hpp"
#include "train/run/directory_swap.hpp"
#include "train_testing.hpp"

namespace fs = std::filesystem;
using namespace kael;
using namespace kael::train;
using namespace kael::train_testing;

namespace {

std::span<const std::byte> bytes(const std::string& text) { return std::as_bytes(std::span(text.data(), text.size())); }

// Entries of the parent directory other than the target: staging directories left behind.
int leftovers(const fs::path& parent, const fs::path& target) {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(parent))
    if (entry.path() != target) ++count;
  return count;
}

}  // namespace

TEST(TrainCheckpoint, ANewDirectoryIsRenamedIntoPlace) {
  TempDir dir;
  const fs::path out = dir.path() / "out";
  {
    StagingDirectory staging(out);
    staging.write_file("a.txt", bytes("first"));
    EXPECT_FALSE(fs::exists(out));
    staging.commit();
  }
  EXPECT_EQ(read_file(out / "a.txt"), "first");
  EXPECT_EQ(leftovers(dir.path(), out), 0);
}

TEST(TrainCheckpoint, AnExistingDirectoryIsSwappedWholeAndItsCacheCarried) {
  TempDir dir;
  const fs::path out = dir.path() / "out";
  write_file(out / "a.txt", "old");
  write_file(out / "stale.txt", "only in the old checkpoint");
  write_file(out / kCacheDir / "tokens-1.bin", "cache");
  StagingDirectory staging(out);
  staging.write_file("a.txt", bytes("new"));
  const std::string_view carried[] = {kCacheDir};
  staging.commit(carried);
  EXPECT_EQ(read_file(out / "a.txt"), "new");
  EXPECT_FALSE(fs::exists(out / "stale.txt"));
  EXPECT_EQ(read_file(out / kCacheDir / "tokens-1.bin"), "cache");
  EXPECT_EQ(leftovers(dir.path(), out), 0);
}

TEST(TrainCheckpoint, AStagingDirectoryNeverCommittedLeavesTheOldOneAndNoTrace) {
  TempDir dir;
  const fs::path out = dir.path() / "out";
  write_file(out / "a.txt", "old");
  try {
    StagingDirectory staging(out);
    staging.write_file("a.txt", bytes("half written"));
    throw Error("a failure mid-save");
  } catch (const Error&) {
  }
  EXPECT_EQ(read_file(out / "a.txt"), "old");
  EXPECT_EQ(leftovers(dir.path(), out), 0);
}

TEST(TrainCheckpoint, StagingDirectoriesOfAKilledRunAreRemoved) {
  TempDir dir;
  const fs::path out = dir.path() / "out";
  fs::create_directories(dir.path() / ".out.tmp-abcdef");
  fs::create_directories(dir.path() / ".other.tmp-abcdef");
  remove_stale_staging(out);
  EXPECT_FALSE(fs::exists(dir.path() / ".out.tmp-abcdef"));
  EXPECT_TRUE(fs::exists(dir.path() / ".other.tmp-abcdef"));
}

TEST(TrainCheckpoint, StagingBesideAnUnwritablePlaceFails) {
  EXPECT_THROW(StagingDirectory("/proc/kael-no-such/out"), Error);
}

TEST(TrainCheckpoint, WhatAnOutDirectoryHolds) {
  TempDir dir;
  EXPECT_EQ(inspect_out(dir.path() / "absent"), OutKind::absent);
  fs::create_directories(dir.path() / "empty" / kCacheDir);
  EXPECT_EQ(inspect_out(dir.path() / "empty"), OutKind::empty);
  write_file(dir.path() / "model" / "model.safetensors", "x");
  EXPECT_EQ(inspect_out(dir.path() / "model"), OutKind::model);
  write_file(dir.path() / "run" / "model.safetensors", "x");
  write_file(dir.path() / "run" / kStateFile, "{}");
  EXPECT_EQ(inspect_out(dir.path() / "run"), OutKind::run);
  write_file(dir.path() / "other" / "notes.txt", "x");
  EXPECT_EQ(inspect_out(dir.path() / "other"), OutKind::other);
  write_file(dir.path() / "file", "x");
  EXPECT_EQ(inspect_out(dir.path() / "file"), OutKind::other);
}
