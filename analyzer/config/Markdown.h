// Fenced code blocks of a Markdown file (CommonMark's ``` and ~~~ fences), for the configuration
// files a README documents: which lines each block holds, and the file's text with everything but
// some of those lines blanked, so that a block parsed on its own reports byte offsets, lines and
// columns of the Markdown file itself. Generic: nothing here knows what a block is about.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardlint::config {

struct LineSpan {
  uint32_t first = 0;  // 0-based line of the first content line
  uint32_t end = 0;    // one past the last content line (first == end: no content)
};

struct FencedBlock {
  std::string info;      // the info string after the fence, trimmed ("yaml", "shell title=x", "")
  std::string language;  // its first word, lower case, without a leading `{` or `.` ("yaml", "")
  uint32_t fenceLine = 0;  // 0-based line of the opening fence
  uint32_t fenceOffset = 0;  // byte offset of the opening fence's line
  LineSpan content;      // the lines between the fences
  bool closed = false;   // false: the block runs to the end of the file
};

// Byte pre-scan: whether `text` may hold a fenced block (a run of three backticks or tildes).
bool mayHaveFences(std::string_view text);

// The fenced code blocks of `text`, in order. An opening fence is three or more backticks or tildes
// after at most three spaces of indentation (a backtick fence's info string holds no backtick); the
// block ends at a line with at most three spaces of indentation and a run of the same character at
// least as long, followed only by spaces or tabs, or at the end of the file. Indented code blocks,
// block quotes and list containers are not modelled (a fence indented four spaces or more in a list
// item is not seen).
std::vector<FencedBlock> fencedBlocks(std::string_view text);

// Where each line of `text` starts (line i's content runs to the next start, its `\n` included).
std::vector<uint32_t> lineStarts(std::string_view text);

// The lines of `span` in `text`, each without its line break.
std::vector<std::string_view> spanLines(std::string_view text, const std::vector<uint32_t>& starts, LineSpan span);

// A line that stands for omitted content in documentation: `...`, `…` or `# ...` (any indentation,
// any number of dots from three).
bool isPlaceholderLine(std::string_view line);

// `text` up to the end of `span`, with every byte outside the span's lines, and every placeholder line
// inside it when `dropPlaceholders`, turned into a space (line breaks stay): parsed on its own, the span
// reports the offsets, lines and columns it has in `text`.
std::string spanView(std::string_view text, const std::vector<uint32_t>& starts, LineSpan span, bool dropPlaceholders);

// Shell here-documents inside `span` (`cat > f.yaml <<EOF` ... `EOF`, `<<-`, quoted delimiters): the
// lines of each body.
std::vector<LineSpan> hereDocuments(std::string_view text, const std::vector<uint32_t>& starts, LineSpan span);

}  // namespace shardlint::config
