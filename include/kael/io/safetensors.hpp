// safetensors: read (copying or memory-mapped), validate, and atomically write.
// Every file is treated as hostile input: docs/behaviour.md, "safetensors", lists the checks.
// Errors: ValueError for a malformed file (messages name the file, the tensor, and what was
// expected vs found), TypeError for an unsupported dtype (F8_*, unknown names), Error for I/O
// (a missing file, a failed write). Implementation: src/io/ (framing, header, load, save).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "kael/core/tensor.hpp"

namespace kael::io {

struct LoadOptions {
  // Map the file copy-on-write and let tensors aligned for their dtype point into the mapping
  // (Tensor::is_borrowed(); the mapping lives while any of them does, even after the file is
  // deleted or replaced; writes to them never reach the file). Misaligned tensors are copied.
  // When false, or when mapping fails, every tensor is read into owned memory.
  bool mmap = true;
  // Largest JSON header accepted, in bytes.
  std::uint64_t max_header_bytes = 100'000'000;
};

// One header entry, as validated.
struct TensorInfo {
  std::string name;
  DType dtype;
  Shape shape;
  std::uint64_t begin;  // data_offsets, relative to the data section
  std::uint64_t end;
};

struct Header {
  std::map<std::string, std::string> metadata;
  std::vector<TensorInfo> tensors;  // sorted by name
  std::uint64_t header_length = 0;  // N, the JSON length
  std::uint64_t file_size = 0;
};

// The book's names: tensors by name (in name order, as written), metadata strings by key.
using TensorMap = std::map<std::string, Tensor>;
using Metadata = std::map<std::string, std::string>;

// How a load gets the bytes: Copy reads them into owned memory; Mapped maps the file
// (LoadOptions::mmap).
enum class LoadMode { Copy, Mapped };

struct SafetensorsFile {
  Metadata metadata;
  TensorMap tensors;
};

// Validates the framing and the header (not the BOOL bytes, which live in the data).
Header read_safetensors_header(const std::filesystem::path& path, const LoadOptions& options = {});
// Validates the whole file (BOOL bytes included) and returns its tensors and metadata.
SafetensorsFile read_safetensors(const std::filesystem::path& path, const LoadOptions& options);
SafetensorsFile read_safetensors(const std::filesystem::path& path, LoadMode mode = LoadMode::Copy);
// read_safetensors without the metadata.
TensorMap load_safetensors(const std::filesystem::path& path, LoadMode mode = LoadMode::Copy);
// Hands the memory behind a tensor that load_safetensors mapped back to the system: the whole
// pages inside its bytes stop counting towards the process's memory. Only for such a tensor,
// once converted and never to be read again (a later read would see the file's bytes, not any
// writes); a tensor borrowed from anything else (Tensor::borrow) would lose its contents. Does
// nothing for a tensor that owns its bytes.
void release_mapped_pages(const Tensor& tensor);
// A mapped file that shrinks (truncated, or rewritten in place) leaves pages with nothing
// behind them; reading one would kill the process with SIGBUS. kael catches that fault for its
// own mappings: the missing page reads as zeros from then on, and the count below grows, so
// whatever was read from a mapping since is void. This throws Error naming `source` when any
// such page was read; commands that read mapped tensors call it before printing a result.
// (Nothing can detect a file rewritten in place at the same size: a mapping's untouched pages
// show the new bytes. A process that must not depend on the file loads with mmap = false.)
void check_mappings_intact(std::string_view source);
// Same rules on bytes already in memory (used by the fuzzer and by tests); tensors are copies.
SafetensorsFile parse_safetensors(std::span<const std::byte> bytes, const LoadOptions& options = {});

// Writes atomically: a temporary file in the same directory, fsync, rename, fsync of the
// directory; on failure the old file is intact and no temporary file is left (Error). JSON
// keys are sorted; the header is padded with spaces so the data starts at a multiple of 8;
// the data is ordered widest dtype first so every tensor is aligned for a mapped load.
// Strided views are written by value. Throws ValueError before touching any file when a name
// is "__metadata__", or a name or metadata string is not valid UTF-8.
void save_safetensors(const std::filesystem::path& path, const TensorMap& tensors, const Metadata& metadata = {});

}  // namespace kael::io
