// Helpers for the rules' messages: the note for a linked accelerate config setting, a wrap API's name, and
// source text on one line.
#include <cctype>

#include "fsdp/FsdpModel.h"

namespace shardlint::rules::fsdp {

std::optional<Note> linkedConfigNote(const Event& e, std::string message) {
  if (e.attr("config").empty() || e.attr("config_line").empty()) return std::nullopt;
  try {
    Location loc;
    loc.path = std::string(e.attr("config"));
    loc.start.line = static_cast<uint32_t>(std::stoul(std::string(e.attr("config_line")))) - 1;
    loc.start.codepointColumn = static_cast<uint32_t>(std::stoul(std::string(e.attr("config_col")))) - 1;
    loc.end = loc.start;
    return Note{loc, std::move(message)};
  } catch (...) {
    return std::nullopt;
  }
}

std::string_view wrapApiName(const Event& wrap) {
  std::string_view api = wrap.attr("api");
  if (api == "fully_shard") return "FSDP2 `fully_shard`";
  if (api == "fsdp1") return "FSDP1 `FullyShardedDataParallel`";
  if (api == "accelerate") return wrap.attr("fsdp_version") == "2" ? "accelerate FSDP2 `prepare`" : "accelerate FSDP1 `prepare`";
  if (api == "fabric") return "Fabric FSDP `setup_module`";
  return api;
}

std::string oneLine(std::string_view text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

}  // namespace shardlint::rules::fsdp
