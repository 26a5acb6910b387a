// Internal to src/train: a whole file's bytes.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace kael::train {

// The bytes of `file`; Error naming it (as `what`, e.g. "data file") when it cannot be read.
std::string read_file_bytes(const std::filesystem::path& file, std::string_view what = "file");

}  // namespace kael::train
