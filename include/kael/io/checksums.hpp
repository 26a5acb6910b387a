// SHA-256 (FIPS 180-4) and SHA256SUMS files, as `sha256sum` writes them: the bundled model's
// files are checked against its SHA256SUMS before they are used (docs/behaviour.md, "The bundled
// model"), so a damaged file is an error naming it, never garbage text.
#pragma once

#include <filesystem>
#include <span>
#include <string>

namespace kael::io {

// The SHA-256 of `bytes`, as 64 lowercase hex digits.
std::string sha256_hex(std::span<const std::byte> bytes);

// The SHA-256 of a file's contents, read in pieces. Error naming the file when it cannot be read.
std::string sha256_file_hex(const std::filesystem::path& file);

// Checks every file listed in DIR/SHA256SUMS ("<64 hex digits>  <name>" lines, names relative to
// DIR, no subdirectories). Error naming SHA256SUMS when it is missing or malformed, and naming the
// file when one is missing or its SHA-256 differs from the listed one.
void verify_sha256sums(const std::filesystem::path& dir);

}  // namespace kael::io
