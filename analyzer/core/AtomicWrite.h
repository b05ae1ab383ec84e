// Writing a file so that a reader (or a crash, a kill, a full disk) sees either the old
// contents or the new ones, never part of them. The one place shardlint writes files the user
// keeps (the baseline, the cache of findings).
#pragma once
#include <filesystem>
#include <string>
#include <string_view>

namespace shardlint {

// Writes `data` to `path` atomically: into a new temporary file in the same folder
// (`.NAME.tmp-XXXXXX`), fsync'ed, then renamed over `path` (and the folder fsync'ed). An
// existing file keeps its permission bits; a new one gets 0666 less the umask, as a plain
// open() would give it. When `path` is a symbolic link, the file it points to is replaced
// (the link stays). On failure the temporary file is removed and `path` is untouched; the
// result is "" on success, else what went wrong.
//
// Test hook: with SHARDLINT_TEST_ABORT_WRITE=1 in the environment, the process ends with
// _exit(86) after writing half of the bytes to the temporary file (before the rename), as if
// killed mid-write. Tests use it to show that the original file survives; it has no other use.
std::string atomicWriteFile(const std::filesystem::path& path, std::string_view data);

// The exit status of the test hook above.
inline constexpr int kAbortWriteExitCode = 86;

}  // namespace shardlint
