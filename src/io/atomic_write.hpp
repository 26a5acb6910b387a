// Replacing a file so that readers see either the old or the new contents, never a mix.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <vector>

namespace kael::io {

// Writes `pieces` in order to a temporary file beside `path`, fsyncs it, renames it over `path`
// and fsyncs the directory. On any failure the temporary file is removed, `path` is left as it
// was, and Error is thrown.
void write_atomically(const std::filesystem::path& path, const std::vector<std::span<const std::byte>>& pieces);

// fsyncs `directory` (empty: "."), so that a rename into it survives a power loss. A file system
// that cannot sync a directory (EINVAL) offers nothing more to wait for and is not an error;
// anything else throws Error naming the directory.
void sync_directory(const std::filesystem::path& directory);

}  // namespace kael::io
