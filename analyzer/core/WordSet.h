// Which of a fixed set of words a text contains, in one pass over its bytes: the pre-scan's question for
// every file it reads (driver/LintFiles.cpp), answered without one search of the whole text per word.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardlint {

class WordSet {
 public:
  static constexpr size_t kMaxWords = 64;
  // The first kMaxWords non-empty words count; word i is bit i of scan()'s mask.
  explicit WordSet(const std::vector<std::string_view>& words);

  // Bit i is set when word i occurs in `text` (case-sensitive, anywhere, as std::string_view::find).
  uint64_t scan(std::string_view text) const;

 private:
  std::vector<std::string> words_;
  std::array<std::vector<uint8_t>, 256> byFirstByte_;  // indices of the words starting with each byte
  // Bit (first byte | second byte << 8) is set when some word starts with those two bytes (a one-byte
  // word sets every pair it starts): most positions of a text are passed over on this one test.
  std::array<uint64_t, 1024> pairs_{};
  uint64_t all_ = 0;
};

}  // namespace shardlint
