#include "io/mapping.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <limits>

#include "kael/io/safetensors.hpp"

namespace kael::io {

std::shared_ptr<Mapping> Mapping::map(int fd, std::uint64_t size) {
  if (size == 0 || size > std::numeric_limits<std::size_t>::max()) return nullptr;
  void* address = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  if (address == MAP_FAILED) return nullptr;
  return std::shared_ptr<Mapping>(new Mapping(static_cast<std::byte*>(address), size));
}

Mapping::~Mapping() { ::munmap(data_, static_cast<std::size_t>(size_)); }

void release_mapped_pages(const Tensor& tensor) {
  if (!tensor.is_borrowed()) return;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(tensor.raw_data());
  const std::uintptr_t first = (begin + page - 1) / page * page, last = (begin + tensor.nbytes()) / page * page;
  // Pages shared with a neighbouring tensor stay. MADV_DONTNEED on a private file mapping
  // drops the pages (and any private copies); failure only means the memory stays in use.
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace kael::io
