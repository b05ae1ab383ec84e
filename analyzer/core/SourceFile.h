// Source model: the bytes of one file plus a line index that maps byte offsets
// to lines and to UTF-8, code-point and UTF-16 columns.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardlint {

struct ByteRange {
  uint32_t begin = 0;
  uint32_t end = 0;
};

// A resolved position. Everything is 0-based here; emitters convert.
struct LineCol {
  uint32_t line = 0;        // 0-based line
  uint32_t byteColumn = 0;  // bytes from the start of the line
  uint32_t codepointColumn = 0;
  uint32_t utf16Column = 0;
};

class LineIndex {
 public:
  LineIndex() = default;
  explicit LineIndex(std::string_view text);

  uint32_t lineCount() const { return static_cast<uint32_t>(starts_.size()); }
  uint32_t lineOf(uint32_t offset) const;
  uint32_t lineStart(uint32_t line) const { return starts_.at(line); }
  // End of the line's content (excluding "\n" / "\r\n").
  uint32_t lineEnd(uint32_t line) const;
  LineCol resolve(uint32_t offset) const;
  // Byte offset of a 0-based (line, UTF-16 column); clamps to the line end.
  uint32_t offsetOfUtf16(uint32_t line, uint32_t utf16Column) const;

 private:
  std::string_view text_;
  std::vector<uint32_t> starts_;
};

struct SourceFile {
  std::string path;  // as the user gave it
  std::string text;
  LineIndex index;

  SourceFile(std::string p, std::string t) : path(std::move(p)), text(std::move(t)), index(text) {}
  SourceFile(const SourceFile&) = delete;
  SourceFile& operator=(const SourceFile&) = delete;
  std::string_view slice(ByteRange r) const {
    return std::string_view(text).substr(r.begin, r.end - r.begin);
  }
};

// UTF-8 validation (rejects overlong forms and surrogates).
bool isValidUtf8(std::string_view s);

// Where two texts differ, as one edit: bytes [begin, oldEnd) of the first became [begin, newEnd) of the
// second (the longest common prefix, then the longest common suffix of the rest). Equal texts: an empty
// edit at their end.
struct ChangedSpan {
  size_t begin = 0, oldEnd = 0, newEnd = 0;
};
ChangedSpan changedSpan(std::string_view before, std::string_view after);

// A 64-bit FNV-1a hash of bytes: cache keys and SARIF fingerprints (which must not change between
// versions: code scanning matches alerts by them).
uint64_t contentHash(std::string_view text);
// A 64-bit hash of a file's text, eight bytes a step (a 128-bit multiply folded): whether a file changed,
// the cached results' checksum. Several times faster than contentHash on a source file; its values are
// kept only in this version's caches.
uint64_t textHash(std::string_view text);
// A hash as 16 lower-case hex digits (cache file names and keys).
std::string hashHex(uint64_t hash);

// Reads a whole file as bytes into `out`; false when it cannot be opened or read.
bool readFileBytes(const std::string& path, std::string& out);

}  // namespace shardlint
