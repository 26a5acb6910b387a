#include "train/read_file.hpp"

#include <fstream>
#include <sstream>

#include "kael/core/error.hpp"

namespace kael::train {

std::string read_file_bytes(const std::filesystem::path& file, std::string_view what) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(str("cannot open ", what, " '", file.string(), "'"));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) throw Error(str("cannot read ", what, " '", file.string(), "'"));
  return std::move(bytes).str();
}

}  // namespace kael::train
