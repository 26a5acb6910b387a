// Internal to src/train: the --log-json file, one record a line, flushed as each is written so a
// run that dies leaves every line before it.
#pragma once

#include <filesystem>
#include <fstream>

#include "kael/train/run.hpp"

namespace kael::train {

class LogFile {
 public:
  // An empty path writes nothing (no --log-json, or not rank 0); a resumed run appends.
  LogFile(const std::filesystem::path& path, bool append);
  void write(const Record& record);

 private:
  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace kael::train
