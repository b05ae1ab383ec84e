#include "core/SourceFile.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace shardlint {

LineIndex::LineIndex(std::string_view text) : text_(text) {
  starts_.push_back(0);
  // "\n", "\r\n" and a lone "\r" end a line, as for CPython and LSP. Most files have no "\r": their
  // lines are found with memchr.
  const char* data = text.data();
  size_t n = text.size();
  if (!std::memchr(data, '\r', n)) {
    for (const char* p = data; (p = static_cast<const char*>(std::memchr(p, '\n', n - static_cast<size_t>(p - data))));)
      starts_.push_back(static_cast<uint32_t>(++p - data));
    return;
  }
  for (uint32_t i = 0; i < n; ++i) {
    if (text[i] == '\n' || (text[i] == '\r' && (i + 1 == n || text[i + 1] != '\n')))
      starts_.push_back(i + 1);
  }
}

uint32_t LineIndex::lineOf(uint32_t offset) const {
  auto it = std::upper_bound(starts_.begin(), starts_.end(), offset);
  return static_cast<uint32_t>((it - starts_.begin()) - 1);
}

uint32_t LineIndex::lineEnd(uint32_t line) const {
  uint32_t end = line + 1 < starts_.size() ? starts_[line + 1] - 1 : static_cast<uint32_t>(text_.size());
  if (end > starts_[line] && end <= text_.size() && end > 0 && text_[end - 1] == '\r') --end;
  return end;
}

LineCol LineIndex::resolve(uint32_t offset) const {
  offset = std::min<uint32_t>(offset, static_cast<uint32_t>(text_.size()));
  LineCol lc;
  lc.line = lineOf(offset);
  uint32_t start = starts_[lc.line];
  lc.byteColumn = offset - start;
  for (uint32_t i = start; i < offset;) {
    unsigned char c = static_cast<unsigned char>(text_[i]);
    uint32_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    lc.codepointColumn += 1;
    lc.utf16Column += len == 4 ? 2 : 1;
    i += len;
  }
  return lc;
}

uint32_t LineIndex::offsetOfUtf16(uint32_t line, uint32_t utf16Column) const {
  if (line >= starts_.size()) return static_cast<uint32_t>(text_.size());
  uint32_t i = starts_[line], end = lineEnd(line), col = 0;
  while (i < end && col < utf16Column) {
    unsigned char c = static_cast<unsigned char>(text_[i]);
    uint32_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    col += len == 4 ? 2 : 1;
    i += len;
  }
  return std::min(i, end);
}

std::string hashHex(uint64_t hash) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(hash));
  return buf;
}

uint64_t contentHash(std::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

uint64_t textHash(std::string_view text) {
  auto mix = [](uint64_t a, uint64_t b) {
    __uint128_t r = static_cast<__uint128_t>(a) * b;
    return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
  };
  constexpr uint64_t k0 = 0xa0761d6478bd642full, k1 = 0xe7037ed1a0b428dbull, k2 = 0x8ebc6af09c88c6e3ull;
  const char* p = text.data();
  size_t n = text.size(), i = 0;
  uint64_t h = mix(k0 ^ n, k2);
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = mix(h ^ w, k1);
  }
  uint64_t tail = 0;
  if (i < n) std::memcpy(&tail, p + i, n - i);
  return mix(mix(h ^ tail, k1 ^ (n - i)), k0);
}

ChangedSpan changedSpan(std::string_view before, std::string_view after) {
  const size_t n = std::min(before.size(), after.size());
  constexpr size_t kBlock = 256;  // compared with memcmp first: a server compares a whole file per edit
  size_t p = 0;
  while (p + kBlock <= n && std::memcmp(before.data() + p, after.data() + p, kBlock) == 0) p += kBlock;
  while (p < n && before[p] == after[p]) ++p;
  size_t s = 0;
  while (s + kBlock <= n - p &&
         std::memcmp(before.data() + before.size() - s - kBlock, after.data() + after.size() - s - kBlock, kBlock) == 0)
    s += kBlock;
  while (s < n - p && before[before.size() - 1 - s] == after[after.size() - 1 - s]) ++s;
  return {p, before.size() - s, after.size() - s};
}

bool isValidUtf8(std::string_view s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    // Thirty-two, then eight ASCII bytes at a time (most source is ASCII).
    if (i + 32 <= n) {
      uint64_t w[4];
      std::memcpy(w, s.data() + i, 32);
      if (!((w[0] | w[1] | w[2] | w[3]) & 0x8080808080808080ull)) {
        i += 32;
        continue;
      }
    }
    if (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      if (!(w & 0x8080808080808080ull)) {
        i += 8;
        continue;
      }
    }
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) { ++i; continue; }
    size_t len;
    uint32_t cp;
    if ((c >> 5) == 6) { len = 2; cp = c & 0x1F; }
    else if ((c >> 4) == 14) { len = 3; cp = c & 0x0F; }
    else if ((c >> 3) == 30) { len = 4; cp = c & 0x07; }
    else return false;
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 2) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
      return false;
    if (cp >= 0xD800 && cp <= 0xDFFF) return false;
    i += len;
  }
  return true;
}

bool readFileBytes(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return false;
  out = ss.str();
  return true;
}

}  // namespace shardlint
