#include "io/posix_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kael/core/error.hpp"
#include "kael/core/file.hpp"

namespace kael::io {

PosixFile::PosixFile(const std::filesystem::path& path, std::string_view what)
    : name_(path.string()), fd_(open_regular_file(path, what)) {}

PosixFile::~PosixFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::uint64_t PosixFile::size() const {
  struct stat info {};
  if (::fstat(fd_, &info) != 0) throw Error(str("cannot stat '", name_, "': ", std::strerror(errno)));
  return static_cast<std::uint64_t>(info.st_size);
}

void PosixFile::read_exact(std::uint64_t offset, std::span<std::byte> out) const {
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t got = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw Error(str("cannot read '", name_, "': ", std::strerror(errno)));
    if (got == 0)
      throw ValueError(str("'", name_, "' ended at byte ", offset + done, " while reading ", out.size(),
                           " bytes at ", offset, " (the file changed size while being read)"));
    done += static_cast<std::size_t>(got);
  }
}

}  // namespace kael::io
