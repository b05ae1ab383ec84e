#include "core/WordSet.h"

#include <cstring>

namespace shardlint {

WordSet::WordSet(const std::vector<std::string_view>& words) {
  for (auto w : words) {
    if (words_.size() == kMaxWords) break;
    size_t bit = words_.size();
    words_.emplace_back(w);
    if (w.empty()) continue;  // never found (an empty word says nothing about a file)
    byFirstByte_[static_cast<unsigned char>(w[0])].push_back(static_cast<uint8_t>(bit));
    all_ |= uint64_t{1} << bit;
    unsigned first = static_cast<unsigned char>(w[0]);
    for (unsigned second = 0; second < 256; ++second) {
      if (w.size() > 1 && second != static_cast<unsigned char>(w[1])) continue;
      unsigned pair = first | second << 8;
      pairs_[pair >> 6] |= uint64_t{1} << (pair & 63);
    }
  }
}

uint64_t WordSet::scan(std::string_view text) const {
  uint64_t found = 0;
  if (all_ == 0) return found;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  size_t n = text.size();
  for (size_t i = 0; i < n; ++i) {
    // The last byte has no second: only a one-byte word can start there (the candidates decide).
    if (i + 1 < n) {
      unsigned pair = p[i] | static_cast<unsigned>(p[i + 1]) << 8;
      if (!((pairs_[pair >> 6] >> (pair & 63)) & 1)) continue;
    }
    const auto& candidates = byFirstByte_[p[i]];
    if (candidates.empty()) continue;
    for (uint8_t w : candidates) {
      if ((found >> w) & 1) continue;
      const std::string& word = words_[w];
      if (word.size() > n - i) continue;
      // Most candidates differ at the second byte: compared here, before a call to memcmp.
      if (word.size() > 1 && p[i + 1] != static_cast<unsigned char>(word[1])) continue;
      if (std::memcmp(p + i, word.data(), word.size()) == 0) {
        found |= uint64_t{1} << w;
        if (found == all_) return found;
      }
    }
  }
  return found;
}

}  // namespace shardlint
