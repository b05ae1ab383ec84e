#include "core/AtomicWrite.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace shardlint {

namespace fs = std::filesystem;

namespace {

std::string errnoText(const std::string& what, const fs::path& p) {
  return what + " " + p.string() + " (" + std::strerror(errno) + ")";
}

bool writeAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

mode_t currentUmask() {
  // umask() can only be read by setting it; shardlint writes files from one thread at a time.
  mode_t m = ::umask(022);
  ::umask(m);
  return m;
}

}  // namespace

std::string atomicWriteFile(const fs::path& path, std::string_view data) {
  std::error_code ec;
  fs::path target = path;
  if (fs::is_symlink(path, ec)) {  // replace the file the link points to, not the link
    fs::path resolved = fs::weakly_canonical(path, ec);
    if (!ec) target = resolved;
  }
  fs::path dir = target.parent_path();
  if (dir.empty()) dir = ".";

  mode_t mode = 0666 & ~currentUmask();
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return target.string() + " is a folder";
    mode = st.st_mode & 07777;
  }

  std::string base(1, '.');  // (not "." + ...: GCC 12 warns falsely about that)
  base += target.filename().string();
  base += ".tmp-XXXXXX";
  std::string templ = (dir / base).string();
  std::vector<char> name(templ.begin(), templ.end());
  name.push_back('\0');
  int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) return errnoText("cannot create a temporary file in", dir);
  fs::path tmp(name.data());
  auto fail = [&](const std::string& why) {
    int saved = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    errno = saved;
    return errnoText(why, tmp);
  };
  if (::fchmod(fd, mode) != 0) return fail("cannot set the mode of");

  size_t first = data.size();
  const char* hook = std::getenv("SHARDLINT_TEST_ABORT_WRITE");
  bool abortMidway = hook && std::strcmp(hook, "1") == 0;
  if (abortMidway) first = data.size() / 2;
  if (!writeAll(fd, data.data(), first)) return fail("cannot write");
  if (abortMidway) {
    ::fsync(fd);
    ::_exit(kAbortWriteExitCode);  // test hook: as if killed here
  }
  if (::fsync(fd) != 0) return fail("cannot flush");
  if (::close(fd) != 0) {
    fd = -1;
    return fail("cannot close");
  }
  fd = -1;
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    int saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
    return errnoText("cannot replace", target);
  }
  // The rename itself is durable once the folder is.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return "";
}

}  // namespace shardlint
