// Helpers of the train layer's tests: a scratch directory, whole-file reads and writes, and small
// GPT-2 configs.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "kael/model/gpt2.hpp"

namespace kael::train_testing {

// A fresh directory under the system temp dir, removed with its contents at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string name = (std::filesystem::temp_directory_path() / "kael-train-test-XXXXXX").string();
    path_ = ::mkdtemp(name.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::string read_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Writes `bytes` to `file`, creating its directories; returns the path.
inline std::filesystem::path write_file(const std::filesystem::path& file, const std::string& bytes) {
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << bytes;
  return file;
}

// A GPT-2 of this shape with 40 positions (room for the tests' sequences), MLP 4 x n_embd.
inline model::Config gpt2_config(int n_layer, int n_head, int n_embd, int vocab_size, bool tied) {
  model::Config c;
  c.n_layer = n_layer;
  c.n_head = n_head;
  c.n_embd = n_embd;
  c.n_positions = 40;
  c.vocab_size = vocab_size;
  c.tie_word_embeddings = tied;
  return c;
}

}  // namespace kael::train_testing
