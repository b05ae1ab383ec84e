// Finds the files to lint under the paths the user gave.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "driver/Project.h"

namespace shardlint {

// A project folder's files by kind (the linter's project walk): launch scripts, configuration files and
// Python files.
struct ProjectFiles {
  std::vector<std::string> launch, configs, python;
};

struct DiscoveryResult {
  std::vector<std::string> files;   // as the user would spell them, sorted, unique
  std::vector<std::string> errors;  // paths that do not exist
  // Folders that could not be listed (permission denied): not searched, reported as SL002.
  std::vector<std::string> unreadable;
  // The walk stopped at `maxEntries` (the files found so far are listed).
  bool truncated = false;
  // Every folder the walk listed, with its stamp taken before it was listed (none: a link, or it could
  // not be stat'ed): while no stamp changed, the walk would find the same files.
  std::vector<std::pair<std::string, std::optional<FileStamp>>> folders;
};

// Directories are walked recursively for *.py files and configuration files
// (*.yaml, *.yml, *.json), launch scripts (*.sh, Makefile) and, when asked, Markdown files, skipping .git, hidden
// folders, virtual environments, node_modules, __pycache__ and build folders.
// Files named explicitly are always linted. Symlinks to folders are not followed (no loop,
// no walk out of the tree); a symlink to a file is linted under its own path; dangling and
// looping links are ignored.
// `maxEntries` (0: none) bounds the directory entries visited, for walks the user did not ask for.
// `markdown`: Markdown files (*.md, for the configs their fenced blocks document) are found too.
DiscoveryResult discover(const std::vector<std::string>& paths, size_t maxEntries = 0, bool markdown = false);

}  // namespace shardlint
