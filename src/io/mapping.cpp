#include "io/mapping.hpp"

#include <sys/mman.h>

#include <limits>

namespace kael::io {

std::shared_ptr<Mapping> Mapping::map(int fd, std::uint64_t size) {
  if (size == 0 || size > std::numeric_limits<std::size_t>::max()) return nullptr;
  void* address = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  if (address == MAP_FAILED) return nullptr;
  return std::shared_ptr<Mapping>(new Mapping(static_cast<std::byte*>(address), size));
}

Mapping::~Mapping() { ::munmap(data_, static_cast<std::size_t>(size_)); }

}  // namespace kael::io
