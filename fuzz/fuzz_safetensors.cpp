// libFuzzer target for the safetensors reader. Every input goes through the in-memory parser
// and, written to a file, through the mapped and the copying loaders. Whatever they accept is
// touched at the first and last byte of every tensor (read and written: mapped pages are
// copy-on-write). Only kael errors may escape the reader; anything else, or any sanitizer
// report, is a bug.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>

#include "kael/core/error.hpp"
#include "kael/io/safetensors.hpp"

namespace {

void touch(kael::io::SafetensorsFile& file) {
  for (auto& [name, tensor] : file.tensors) {
    const std::size_t n = tensor.nbytes();
    if (n == 0) continue;
    volatile std::byte* bytes = tensor.raw_data();
    bytes[0] = bytes[0];
    bytes[n - 1] = bytes[n - 1];
  }
}

// One scratch file per fuzzing process, removed at exit; in memory (/dev/shm) when there is one,
// since writing it is most of the cost of each run.
std::filesystem::path scratch_dir() {
  std::error_code error;
  if (std::filesystem::is_directory("/dev/shm", error)) return "/dev/shm";
  return std::filesystem::temp_directory_path();
}
struct Scratch {
  std::filesystem::path path = scratch_dir() / ("kael_fuzz_" + std::to_string(::getpid()) + ".safetensors");
  ~Scratch() {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
  }
};

bool write_scratch(const std::filesystem::path& path, const std::uint8_t* data, std::size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // A small header cap keeps each run cheap; the cap check itself is covered by the tests.
  const kael::io::LoadOptions mapped{.mmap = true, .max_header_bytes = 1 << 20};
  const kael::io::LoadOptions copying{.mmap = false, .max_header_bytes = 1 << 20};
  try {
    auto file = kael::io::parse_safetensors(std::as_bytes(std::span(data, size)), copying);
    touch(file);
  } catch (const kael::Error&) {
  }
  static Scratch scratch;
  if (!write_scratch(scratch.path, data, size)) return 0;
  for (const auto& options : {mapped, copying}) {
    try {
      auto file = kael::io::read_safetensors(scratch.path, options);
      touch(file);
    } catch (const kael::Error&) {
    }
  }
  try {
    kael::io::read_safetensors_header(scratch.path, mapped);
  } catch (const kael::Error&) {
  }
  return 0;
}
