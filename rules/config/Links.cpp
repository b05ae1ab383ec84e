#include "config/Links.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "config/Roles.h"

namespace shardlint::rules::config {

Facts accelerateConfigFacts(const SourceFile& file, const std::vector<shardlint::config::YNode>& docs) {
  for (const auto& doc : docs) {
    auto s = detectFsdp(file, doc);
    if (!s || s->role != Role::Accelerate || !s->enabled) continue;
    Facts f;
    f["accelerate_fsdp"] = std::to_string(s->version);
    f["config"] = file.path;
    const YNode* decide = s->section ? s->section : s->root;
    if (const auto* e = s->entry("use_orig_params")) {
      auto b = asBool(&e->second);
      f["use_orig_params"] = b ? (*b ? "true" : "false") : "";
      decide = &e->second;
      if (decide->isScalar()) f["config_value"] = encodeLocation(file, decide->range);
    } else {
      f["use_orig_params"] = "";  // the launcher's default (true) applies
    }
    // SL203: the FSDP1 sharding strategy the launcher exports (FSDP_SHARDING_STRATEGY), as written.
    if (const YNode* v = s->value("sharding_strategy"); v && v->isScalar()) f["sharding_strategy"] = v->value;
    LineCol lc = file.index.resolve(decide->range.begin);
    f["config_line"] = std::to_string(lc.line + 1);
    f["config_col"] = std::to_string(lc.codepointColumn + 1);
    return f;
  }
  return {};
}

namespace {
struct Word {
  std::string text;
  ByteRange range;
};

// Words of a command with their byte ranges; backslash-newline continuations are
// joined, quotes removed; "\n" marks the end of a command.
std::vector<Word> words(std::string_view cmd) {
  std::vector<Word> out;
  Word cur;
  bool inWord = false;
  char quote = 0;
  auto flush = [&](uint32_t end) {
    if (inWord) {
      cur.range.end = end;
      out.push_back(cur);
    }
    cur = Word{};
    inWord = false;
  };
  for (uint32_t i = 0; i < cmd.size(); ++i) {
    char c = cmd[i];
    if (quote) {
      if (c == quote) quote = 0;
      else cur.text += c;
      continue;
    }
    if (c == '#' && !inWord) {  // a comment runs to the line end
      while (i + 1 < cmd.size() && cmd[i + 1] != '\n') ++i;
      continue;
    }
    if (c == '\\' && i + 1 < cmd.size() && cmd[i + 1] == '\n') {
      flush(i);
      ++i;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c)) || c == ';' || c == '&' || c == '|') {
      flush(i);
      if (c == '\n' || c == ';' || c == '&' || c == '|') out.push_back(Word{"\n", {i, i + 1}});
      continue;
    }
    if (!inWord) {
      inWord = true;
      cur.range.begin = i;
    }
    if (c == '"' || c == '\'') quote = c;
    else cur.text += c;
  }
  flush(static_cast<uint32_t>(cmd.size()));
  return out;
}

YNode scalar(std::string value, ByteRange range) {
  YNode n;
  n.kind = YNode::Kind::Scalar;
  n.value = std::move(value);
  n.range = range;
  return n;
}
}  // namespace

std::vector<LaunchLink> accelerateLaunchLinks(const SourceFile& file) {
  std::vector<LaunchLink> links;
  std::vector<Word> w = words(file.text);
  for (size_t i = 0; i + 1 < w.size(); ++i) {
    if (w[i].text != "launch" || i == 0 ||
        (w[i - 1].text != "accelerate" && w[i - 1].text.find("/accelerate") == std::string::npos))
      continue;
    LaunchLink link;
    YNode flags;
    flags.kind = YNode::Kind::Map;
    flags.range = w[i].range;
    bool useFsdp = false;
    for (size_t j = i + 1; j < w.size() && w[j].text != "\n"; ++j) {
      std::string a = w[j].text;
      ByteRange keyRange = w[j].range;
      std::string value;
      ByteRange valueRange = w[j].range;
      bool inlineValue = false;
      auto eq = a.find('=');
      if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
        value = a.substr(eq + 1);
        a = a.substr(0, eq);
        keyRange.end = keyRange.begin + static_cast<uint32_t>(eq);
        valueRange.begin = keyRange.end + 1;
        inlineValue = true;
      }
      std::replace(a.begin(), a.end(), '-', '_');  // --fsdp-version == --fsdp_version
      auto next = [&]() -> std::string {
        if (inlineValue) return value;
        if (j + 1 < w.size() && w[j + 1].text != "\n" && w[j + 1].text.rfind("--", 0) != 0) {
          valueRange = w[j + 1].range;
          return w[++j].text;
        }
        return "";
      };
      if (a == "__config_file") {
        link.configFile = next();
      } else if (a == "__use_fsdp") {
        useFsdp = true;
      } else if (a.rfind("__fsdp_", 0) == 0) {
        std::string key = a.substr(2);
        std::string v = next();
        if (v.empty()) v = "true", valueRange = keyRange;  // a bare boolean flag
        flags.entries.emplace_back(scalar(key, {keyRange.begin, keyRange.end}), scalar(v, valueRange));
        flags.range.end = valueRange.end;
        if (key == "fsdp_version") link.facts["accelerate_fsdp"] = v;
        if (key == "fsdp_sharding_strategy") link.facts["sharding_strategy"] = v;
        if (key == "fsdp_use_orig_params") {
          std::string lower = v;
          for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          link.facts["use_orig_params"] = lower == "true" || lower == "1" || lower == "yes" ? "true" : "false";
          link.facts["config"] = file.path;
          LineCol lc = file.index.resolve(valueRange.begin);
          link.facts["config_line"] = std::to_string(lc.line + 1);
          link.facts["config_col"] = std::to_string(lc.codepointColumn + 1);
          link.facts["config_value"] = encodeLocation(file, valueRange);
        }
      } else if (a.rfind("__", 0) == 0) {
        continue;  // another launcher flag (its value, if any, is skipped with it below)
      } else if (a.size() > 3 && a.substr(a.size() - 3) == ".py") {
        link.script = a;
        break;  // the script; what follows are its own arguments
      }
    }
    if ((useFsdp || !flags.entries.empty()) && !link.facts.count("accelerate_fsdp")) link.facts["accelerate_fsdp"] = "1";
    if (!flags.entries.empty()) {
      YNode doc;
      doc.kind = YNode::Kind::Map;
      doc.range = flags.range;
      doc.entries.emplace_back(scalar("__launch__", w[i].range), scalar("true", w[i].range));
      doc.entries.emplace_back(scalar("fsdp_config", w[i].range), std::move(flags));
      link.settings = std::move(doc);
    }
    if (!link.script.empty() || link.settings.isMap()) links.push_back(std::move(link));
  }
  // A Python script's own `--fsdp VALUE` argument (`torchrun train.py --fsdp "full_shard auto_wrap"`):
  // the Trainer's option string when the script parses its `TrainingArguments` from the command line.
  // Kept as a document {__script_args__: true, fsdp: VALUE} for the rules to judge (no script link).
  bool afterScript = false;
  for (size_t j = 0; j < w.size(); ++j) {
    const std::string& a = w[j].text;
    if (a == "\n") {
      afterScript = false;
      continue;
    }
    if (!afterScript) {
      afterScript = a.size() > 3 && a.compare(a.size() - 3, 3, ".py") == 0;
      continue;
    }
    std::string value;
    ByteRange valueRange = w[j].range;
    if (a.rfind("--fsdp=", 0) == 0) {
      value = a.substr(7);
      valueRange.begin += 7;
    } else if (a == "--fsdp" && j + 1 < w.size() && w[j + 1].text != "\n" && w[j + 1].text.rfind("--", 0) != 0) {
      value = w[++j].text;
      valueRange = w[j].range;
    } else {
      continue;
    }
    YNode doc;
    doc.kind = YNode::Kind::Map;
    doc.range = valueRange;
    doc.entries.emplace_back(scalar("__script_args__", valueRange), scalar("true", valueRange));
    YNode v = scalar(value, valueRange);
    v.quoted = valueRange.end > valueRange.begin && (file.text[valueRange.begin] == '"' || file.text[valueRange.begin] == '\'');
    doc.entries.emplace_back(scalar("fsdp", valueRange), std::move(v));
    LaunchLink link;
    link.settings = std::move(doc);
    links.push_back(std::move(link));
  }
  return links;
}

std::string encodeLocation(const SourceFile& file, ByteRange range) {
  Location l = makeLocation(file, range);
  std::string out = std::to_string(range.begin);
  for (uint32_t v : {range.end, l.start.line, l.start.byteColumn, l.start.codepointColumn, l.start.utf16Column,
                     l.end.line, l.end.byteColumn, l.end.codepointColumn, l.end.utf16Column}) {
    out += ' ';
    out += std::to_string(v);
  }
  return out;
}

std::optional<Location> decodeLocation(const std::string& path, std::string_view value) {
  uint32_t v[10];
  size_t at = 0;
  for (uint32_t& x : v) {
    while (at < value.size() && value[at] == ' ') ++at;
    auto [end, ec] = std::from_chars(value.data() + at, value.data() + value.size(), x);
    if (ec != std::errc()) return std::nullopt;
    at = static_cast<size_t>(end - value.data());
  }
  if (at != value.size() || v[0] > v[1]) return std::nullopt;
  Location l;
  l.path = path;
  l.range = ByteRange{v[0], v[1]};
  l.start = LineCol{v[2], v[3], v[4], v[5]};
  l.end = LineCol{v[6], v[7], v[8], v[9]};
  return l;
}

std::vector<std::string> factWords(const Facts& facts) {
  std::vector<std::string> words;
  if (facts.count("accelerate_fsdp") || facts.count("fsdp-version")) words.emplace_back("ccelerat");
  for (const char* key : {"optimizers", "wraps"}) {
    auto it = facts.find(key);
    if (it == facts.end()) continue;
    const std::string& v = it->second;
    for (size_t start = 0; start <= v.size();) {
      size_t comma = v.find(',', start);
      std::string item = v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!item.empty()) words.push_back(item.substr(item.rfind('.') == std::string::npos ? 0 : item.rfind('.') + 1));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return words;
}

}  // namespace shardlint::rules::config
