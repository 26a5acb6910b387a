#include "io/atomic_write.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kael/core/error.hpp"

namespace kael::io {

namespace {

// Owns the temporary file until it has been renamed into place.
class TempFile {
 public:
  explicit TempFile(const std::filesystem::path& target) {
    const auto directory = target.parent_path().empty() ? std::filesystem::path(".") : target.parent_path();
    // Hidden, beside the target (rename is atomic only within one file system).
    std::string leaf = ".";
    leaf += target.filename().string();
    leaf += ".tmp.XXXXXX";
    name_ = (directory / leaf).string();
    fd_ = ::mkostemp(name_.data(), O_CLOEXEC);
    if (fd_ < 0)
      throw Error(str("cannot create a temporary file in '", directory.string(), "': ", std::strerror(errno)));
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(name_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  int fd() const { return fd_; }
  const std::string& name() const { return name_; }
  void fail(std::string_view what) const { throw Error(str("cannot ", what, " '", name_, "': ", std::strerror(errno))); }
  void close() {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("close");
  }
  void commit() { committed_ = true; }

 private:
  std::string name_;
  int fd_ = -1;
  bool committed_ = false;
};

void write_all(const TempFile& file, std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    const ssize_t wrote = ::write(file.fd(), bytes.data(), bytes.size());
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) file.fail("write");
    bytes = bytes.subspan(static_cast<std::size_t>(wrote));
  }
}

// mkstemp creates the file 0600; give the result the mode the old file had, or rw-r--r--.
void set_mode(const TempFile& file, const std::filesystem::path& target) {
  struct stat old {};
  const mode_t mode = ::stat(target.c_str(), &old) == 0 ? (old.st_mode & 07777) : 0644;
  if (::fchmod(file.fd(), mode) != 0) file.fail("set the mode of");
}

}  // namespace

void sync_directory(const std::filesystem::path& directory) {
  const auto path = directory.empty() ? std::filesystem::path(".") : directory;
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw Error(str("cannot open directory '", path.string(), "' to sync it: ", std::strerror(errno)));
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (result != 0 && error != EINVAL)
    throw Error(str("cannot sync directory '", path.string(), "': ", std::strerror(error)));
}

void write_atomically(const std::filesystem::path& path, const std::vector<std::span<const std::byte>>& pieces) {
  TempFile temp(path);
  set_mode(temp, path);
  for (const auto& piece : pieces) write_all(temp, piece);
  if (::fsync(temp.fd()) != 0) temp.fail("sync");
  temp.close();
  if (::rename(temp.name().c_str(), path.c_str()) != 0)
    throw Error(str("cannot rename '", temp.name(), "' to '", path.string(), "': ", std::strerror(errno)));
  temp.commit();
  try {
    sync_directory(path.parent_path());
  } catch (const Error& e) {
    throw Error(str("saved '", path.string(), "' but ", e.what()));
  }
}

}  // namespace kael::io
