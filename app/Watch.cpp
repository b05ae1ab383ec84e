#include "Watch.h"

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace shardlint {

DirectoryWatcher::DirectoryWatcher() : fd_(::inotify_init1(IN_CLOEXEC)) {}

DirectoryWatcher::~DirectoryWatcher() {
  if (fd_ >= 0) ::close(fd_);
}

void DirectoryWatcher::add(const std::string& dir) {
  if (fd_ < 0) return;
  ::inotify_add_watch(fd_, dir.c_str(),
                      IN_CLOSE_WRITE | IN_MODIFY | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB);
}

bool DirectoryWatcher::waitForChange(const std::function<bool(const std::string& name)>& relevant, int quietMs) {
  if (fd_ < 0) return false;
  alignas(struct inotify_event) char buf[64 * 1024];
  // Reads the pending events: -1 on failure, else whether one of them matters.
  auto drain = [&]() -> int {
    ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n < 0) return errno == EINTR || errno == EAGAIN ? 0 : -1;
    bool any = false;
    for (ssize_t at = 0; at + static_cast<ssize_t>(sizeof(struct inotify_event)) <= n;) {
      const auto* ev = reinterpret_cast<const struct inotify_event*>(buf + at);
      std::string name = ev->len ? std::string(ev->name) : std::string();
      if ((ev->mask & IN_ISDIR) ? !(ev->mask & IN_ATTRIB) : (!name.empty() && relevant(name))) any = true;
      if (ev->mask & IN_Q_OVERFLOW) any = true;
      at += static_cast<ssize_t>(sizeof(struct inotify_event) + ev->len);
    }
    return any ? 1 : 0;
  };
  struct pollfd p {
    fd_, POLLIN, 0
  };
  for (;;) {  // the first change that matters
    int r = ::poll(&p, 1, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    int d = drain();
    if (d < 0) return false;
    if (d > 0) break;
  }
  for (;;) {  // then quiet
    int r = ::poll(&p, 1, quietMs);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    if (r == 0) return true;
    if (drain() < 0) return false;
  }
}

}  // namespace shardlint
