#include "core/mapped_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sys/mman.h>
#include <sys/stat.h>

#include "core/error.h"

namespace qwenrt {

namespace {
// Opens `path` read-only without blocking (a FIFO would otherwise wait for a writer) and checks it
// is a regular file; returns the descriptor and its size.
int open_regular(const std::filesystem::path& path, std::size_t& size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(path.string(), ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    fail(path.string(), ": cannot stat: ", std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path.string(), S_ISDIR(st.st_mode) ? ": is a directory, not a regular file" : ": not a regular file (a FIFO, socket or device?)");
  }
  size = static_cast<std::size_t>(st.st_size);
  return fd;
}
}  // namespace

std::string read_regular_file(const std::filesystem::path& path, std::size_t max_bytes) {
  std::size_t size = 0;
  const int fd = open_regular(path, size);
  if (size > max_bytes) {
    ::close(fd);
    fail(path.string(), ": ", size, " bytes is over the limit of ", max_bytes, " bytes for this file");
  }
  std::string out(size, '\0');
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::read(fd, out.data() + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      fail(path.string(), ": read failed: ", std::strerror(e));
    }
    if (n == 0) break;  // shrank while reading
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  int fd = open_regular(path, size_);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      fail(path.string(), ": cannot map: ", std::strerror(e));
    }
    data_ = static_cast<const std::byte*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

}  // namespace qwenrt
