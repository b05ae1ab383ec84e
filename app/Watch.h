// `shardlint check --watch`: waiting for file changes under folders (Linux inotify).
#pragma once
#include <functional>
#include <string>

namespace shardlint {

class DirectoryWatcher {
 public:
  DirectoryWatcher();
  ~DirectoryWatcher();
  DirectoryWatcher(const DirectoryWatcher&) = delete;
  DirectoryWatcher& operator=(const DirectoryWatcher&) = delete;

  bool ok() const { return fd_ >= 0; }
  // Watches `dir` itself (not its subfolders) for files written, created, deleted or moved. Adding a
  // folder twice is harmless.
  void add(const std::string& dir);
  // Blocks until a file `relevant` accepts (by its name) changes, or a folder is created, removed or
  // moved; then until nothing has changed for `quietMs` milliseconds (an editor's save is several
  // events). Other files (the report redirected into the tree, editor swap files) are ignored.
  // False when the watch failed.
  bool waitForChange(const std::function<bool(const std::string& name)>& relevant, int quietMs = 150);

 private:
  int fd_ = -1;
};

}  // namespace shardlint
