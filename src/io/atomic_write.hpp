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

}  // namespace kael::io
