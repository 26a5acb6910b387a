// Finding the documents of --data: files named directly, directories searched recursively, and
// the records of JSONL files.
#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

#include "kael/core/error.hpp"
#include "kael/core/json.hpp"
#include "kael/train/data.hpp"
#include "kael/core/file.hpp"

namespace kael::train {

namespace fs = std::filesystem;

namespace {

bool has_text_extension(const fs::path& path) {
  const std::string extension = path.extension().string();
  return std::any_of(std::begin(kTextExtensions), std::end(kTextExtensions),
                     [&](const char* known) { return extension == known; });
}

void check_not_empty(const fs::path& file) {
  std::error_code error;
  const auto size = fs::file_size(file, error);
  if (error) throw Error(str("cannot read data file '", file.string(), "': ", error.message()));
  if (size == 0) throw ValueError(str("data file '", file.string(), "' is empty"));
}

std::vector<fs::path> directory_files(const fs::path& directory) {
  std::vector<fs::path> files;
  std::error_code error;
  for (fs::recursive_directory_iterator it(directory, fs::directory_options::follow_directory_symlink, error), end;
       !error && it != end; it.increment(error)) {
    if (it->is_regular_file() && has_text_extension(it->path())) files.push_back(it->path());
  }
  if (error) throw Error(str("cannot list data directory '", directory.string(), "': ", error.message()));
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::string extensions;
    for (const char* extension : kTextExtensions) extensions += str(extensions.empty() ? "" : ", ", extension);
    throw Error(str("data directory '", directory.string(), "' holds no file ending in ", extensions));
  }
  return files;
}

std::vector<std::string> jsonl_documents(const fs::path& file, const std::string& bytes) {
  std::vector<std::string> documents;
  std::istringstream lines(bytes);
  std::string line;
  for (std::size_t number = 1; std::getline(lines, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto where = [&] { return str("data file '", file.string(), "' line ", number); };
    const nlohmann::json record = json::parse(line, where());
    if (!record.is_object()) throw ValueError(str(where(), ": expected a JSON object, found ", record.type_name()));
    const auto text = record.find("text");
    if (text == record.end()) throw ValueError(str(where(), ": the record has no \"text\" field"));
    if (!text->is_string()) throw ValueError(str(where(), ": \"text\" is a ", text->type_name(), ", not a string"));
    documents.push_back(text->get<std::string>());
  }
  if (documents.empty()) throw ValueError(str("data file '", file.string(), "' holds no JSONL record"));
  return documents;
}

}  // namespace

std::vector<fs::path> list_data_files(std::span<const fs::path> inputs) {
  if (inputs.empty()) throw ValueError("no data given: name at least one file or directory");
  std::vector<fs::path> files;
  for (const fs::path& input : inputs) {
    std::error_code error;
    const auto status = fs::status(input, error);
    if (error || !fs::exists(status)) throw Error(str("data path '", input.string(), "' does not exist"));
    if (fs::is_directory(status)) {
      for (auto& file : directory_files(input)) files.push_back(std::move(file));
    } else {
      files.push_back(input);
    }
  }
  for (const fs::path& file : files) check_not_empty(file);
  return files;
}

std::vector<std::string> read_documents(const fs::path& file) {
  // A data file is read whole and tokenized in memory: far more than a machine's memory is
  // refused at once rather than grown into.
  constexpr std::uint64_t kMaxDataFileBytes = std::uint64_t{64} << 30;
  std::string bytes = read_regular_file(file, "data file", kMaxDataFileBytes);
  if (file.extension() == ".jsonl") return jsonl_documents(file, bytes);
  std::vector<std::string> documents;
  documents.push_back(std::move(bytes));
  return documents;
}

}  // namespace kael::train
