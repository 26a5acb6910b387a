#include "train/run/log_file.hpp"

#include "kael/core/error.hpp"

namespace kael::train {

LogFile::LogFile(const std::filesystem::path& path, bool append) : path_(path) {
  if (path.empty()) return;
  out_.open(path, append ? std::ios::app : std::ios::trunc);
  if (!out_) throw Error(str("cannot open --log-json '", path.string(), "' for writing"));
}

void LogFile::write(const Record& record) {
  if (path_.empty()) return;
  out_ << record_json(record) << '\n';
  out_.flush();
  if (!out_) throw Error(str("cannot write --log-json '", path_.string(), "'"));
}

}  // namespace kael::train
