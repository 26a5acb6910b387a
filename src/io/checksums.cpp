// DIR/SHA256SUMS checked file by file (kael/io/checksums.hpp).
#include <sstream>
#include <string>

#include "kael/core/error.hpp"
#include "kael/core/file.hpp"
#include "kael/io/checksums.hpp"

namespace kael::io {
namespace {

bool is_lower_hex(const std::string& text) {
  return text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

void verify_sha256sums(const std::filesystem::path& dir) {
  const auto sums_path = dir / "SHA256SUMS";
  constexpr std::uint64_t kMaxListBytes = 1 << 20;  // a line per file of a model folder
  std::istringstream sums(read_regular_file(sums_path, "checksum list", kMaxListBytes));
  std::string line;
  int line_number = 0;
  int files = 0;
  while (std::getline(sums, line)) {
    ++line_number;
    if (line.empty()) continue;
    // sha256sum's text mode writes "<hex>  <name>", its binary mode "<hex> *<name>".
    const std::string hex = line.substr(0, 64);
    const std::string name = line.size() > 66 ? line.substr(66) : "";
    const bool separated = line.size() > 66 && line[64] == ' ' && (line[65] == ' ' || line[65] == '*');
    if (!separated || !is_lower_hex(hex) || name.find('/') != std::string::npos || name == "." || name == "..")
      throw ValueError(str("'", sums_path.string(), "' line ", line_number,
                           ": expected '<64 lowercase hex digits>  <file name>', found '", line, "'"));
    const auto file = dir / name;
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::status(file, ec)))
      throw Error(str("'", file.string(), "' is missing (listed in '", sums_path.string(), "')"));
    const std::string actual = sha256_file_hex(file);  // anything but a regular file is refused, named as what it is
    if (actual != hex)
      throw ValueError(str("'", file.string(), "' is damaged: its SHA-256 is ", actual, ", '",
                           sums_path.string(), "' lists ", hex));
    ++files;
  }
  if (files == 0) throw ValueError(str("'", sums_path.string(), "' lists no files"));
}

}  // namespace kael::io
