// Configuration files, Markdown configuration blocks and launch scripts: which files are configs,
// reading and parsing them, which facts apply to which Python file (linkConfigs), the facts of the
// declared dependencies (withRequirements), and the configuration rules run with suppressions.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "config/Markdown.h"
#include "driver/LinterImpl.h"
#include "driver/ModuleTable.h"
#include "driver/Requirements.h"
#include "driver/Suppressions.h"

namespace shardlint {

bool isLaunchPath(const std::string& path) {
  std::filesystem::path p(path);
  std::string name = p.filename().string();
  return p.extension() == ".sh" || name == "Makefile" || name == "makefile" || name == "GNUmakefile";
}

void Linter::runConfigRules(ConfigContext& cx) const {
  for (auto& rule : catalog_.makeRules())
    if (rule->checksConfigs() && options_.selection.enabled(rule->info())) rule->checkConfig(cx);
}

void Linter::checkLaunchSettings(const SourceFile& file, const std::vector<LaunchLink>& links,
                                 std::vector<Diagnostic>& out,
                                 const std::vector<std::pair<std::string, uint32_t>>* directives) const {
  static const Facts noProject;
  std::vector<Diagnostic> found;
  std::vector<std::unique_ptr<Facts>> factStore;
  const Facts* project = nullptr;  // no project code to consult; the declared dependencies, when any
  for (const auto& link : links) {
    if (!link.settings.isMap()) continue;  // the command's own settings, checked like a config
    if (!project) project = withRequirements(file.path, &noProject, factStore);
    std::vector<config::YNode> docs{link.settings};
    ConfigContext cx(file, docs, found, project);
    runConfigRules(cx);
  }
  if (found.empty()) return;
  Suppressions sup(&file);
  sup.addHashComments(file);  // shell scripts and Makefiles use `#` comments like YAML
  if (directives)
    for (const auto& [comment, offset] : *directives) sup.addComment(comment, offset);
  for (auto& d : found)
    if (!sup.suppresses(d, catalog_)) out.push_back(std::move(d));
}

const Facts* Linter::withRequirements(const std::string& path, const Facts* base,
                                      std::vector<std::unique_ptr<Facts>>& store) const {
  if (catalog_.requirementPackages.empty()) return base;
  std::string parent = parentKey(absolutePathKey(path));
  if (parent.empty()) return base;
  std::filesystem::path folder(parent);
  const Requirements& declared = requirements_->forDirectory(folder);
  Facts added;
  for (const auto& name : catalog_.requirementPackages) {
    auto it = declared.find(name);
    if (it == declared.end()) continue;
    std::string value;
    for (const auto& r : it->second)
      value += (value.empty() ? "" : "\n") + r.spec + "\t" +
               std::filesystem::path(r.file).lexically_relative(folder).generic_string() + ":" +
               std::to_string(r.line);
    added["requires:" + name] = std::move(value);
  }
  if (added.empty()) return base;
  if (base)
    for (const auto& [k, v] : *base) added.emplace(k, v);
  store.push_back(std::make_unique<Facts>(std::move(added)));
  return store.back().get();
}

std::optional<FileStamp> ConfigMentions::stampOf(const std::string& path) const {
  if (!cache_ || options_.overlays.count(absolutePathKey(path))) return std::nullopt;
  return PrescanCache::statOf(path);
}

bool ConfigMentions::knownQuiet(const std::string& path, const std::optional<FileStamp>& stamp) {
  std::string key = absolutePathKey(path);
  if (quiet_.count(key)) return true;
  if (!stamp) return false;
  auto known = cache_->find(key, *stamp, words_);
  return known && !(known->mask & 1);
}

bool ConfigMentions::knownMentioning(const std::string& path, const std::optional<FileStamp>& stamp) {
  if (!stamp) return false;
  auto known = cache_->find(absolutePathKey(path), *stamp, words_);
  return known && (known->mask & 1);
}

void ConfigMentions::remember(const std::string& path, const std::optional<FileStamp>& stamp, size_t bytes,
                              bool mentions) {
  std::string key = absolutePathKey(path);
  if (!mentions) quiet_.insert(key);
  if (!stamp || stamp->size != bytes) return;
  if (auto known = cache_->find(key, *stamp, words_); known && (known->mask & 1) == (mentions ? 1u : 0u)) return;
  cache_->store(key, PrescanCache::Entry{*stamp, mentions ? 1u : 0u, false, {}, 0}, words_);
}

std::optional<Facts> ConfigMentions::knownFacts(const std::string& key, const std::optional<FileStamp>& stamp) const {
  if (!stamp) return std::nullopt;
  return cache_->configFacts(key, *stamp);
}

void ConfigMentions::rememberFacts(const std::string& key, const std::optional<FileStamp>& stamp, size_t bytes,
                                   const Facts& facts) {
  if (stamp && stamp->size == bytes) cache_->storeConfigFacts(key, *stamp, facts);
}

std::optional<std::vector<PrescanCache::LaunchTarget>> ConfigMentions::knownLaunch(
    const std::string& key, const std::optional<FileStamp>& stamp) const {
  if (!stamp) return std::nullopt;
  return cache_->launchTargets(key, *stamp);
}

void ConfigMentions::rememberLaunch(const std::string& key, const std::optional<FileStamp>& stamp, size_t bytes,
                                    const std::vector<PrescanCache::LaunchTarget>& targets) {
  if (stamp && stamp->size == bytes) cache_->storeLaunchTargets(key, *stamp, targets);
}

bool Linter::mentionsConfigWord(std::string_view text) const {
  if (catalog_.configWords.empty()) return true;
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return std::any_of(catalog_.configWords.begin(), catalog_.configWords.end(),
                     [&](std::string_view w) { return lower.find(w) != std::string::npos; });
}

std::map<std::string, Facts> Linter::linkConfigs(const std::vector<std::string>& launchPaths,
                                                 std::map<std::string, Facts> configFacts,
                                                 std::vector<Diagnostic>* diagnostics,
                                                 const std::map<std::string, ProjectFiles>& projects,
                                                 ConfigMentions* mentions) const {
  namespace fs = std::filesystem;
  std::vector<const Facts*> named;  // the named configs' (map nodes: the pointers stay valid)
  for (const auto& [path, f] : configFacts) named.push_back(&f);
  auto factsOfConfig = [&](const std::string& path) -> const Facts* {
    std::string key = absolutePathKey(path);
    auto it = configFacts.find(key);
    if (it != configFacts.end()) return &it->second;
    // A config outside the linted paths: read it for its facts only (its findings are not ours to report),
    // unless the cache knows them by the file's stamp (the language server's next edit).
    std::optional<FileStamp> stamp = mentions ? mentions->stampOf(path) : std::nullopt;
    if (auto known = mentions ? mentions->knownFacts(key, stamp) : std::nullopt)
      return &(configFacts[key] = std::move(*known));
    ReadResult r = readSource(path, options_);
    size_t bytes = r.text.size();
    Facts f;
    if (!r.skipped && !contentProblem(r.text, options_.maxFileBytes) && catalog_.configFacts) {
      SourceFile file(path, std::move(r.text));
      try {
        auto docs = config::parseYaml(file);
        f = catalog_.configFacts(file, docs);
      } catch (const config::YamlError&) {
      }
    }
    if (mentions && !r.skipped) mentions->rememberFacts(key, stamp, bytes, f);
    return &(configFacts[key] = std::move(f));
  };
  std::map<std::string, Facts> out;
  // 1. Launch commands in shell scripts and Makefiles name the script and its config.
  if (catalog_.launchLinks) {
    // The named launch scripts (their own settings are checked), then those of the linted scripts' projects.
    std::vector<std::pair<std::string, bool>> allLaunch;
    std::set<std::string> seen;
    for (const auto& lp : launchPaths)
      if (seen.insert(absolutePathKey(lp)).second) allLaunch.emplace_back(lp, true);
    for (const auto& [dir, files] : projects)
      for (const auto& lp : files.launch)
        if (seen.insert(absolutePathKey(lp)).second) allLaunch.emplace_back(lp, false);
    for (const auto& [lp, named] : allLaunch) {
      // A launch file read only for its links (not named: its own settings are not checked here) is known
      // by its stamp after the first read (the language server's next edits).
      std::vector<PrescanCache::LaunchTarget> targets;
      bool keep = !named && mentions;
      std::string key = keep ? absolutePathKey(lp) : std::string();
      std::optional<FileStamp> stamp = keep ? mentions->stampOf(lp) : std::nullopt;
      if (auto known = keep ? mentions->knownLaunch(key, stamp) : std::nullopt) {
        targets = std::move(*known);
      } else {
        ReadResult r = readSource(lp, options_);
        if (r.skipped || contentProblem(r.text, options_.maxFileBytes)) continue;
        size_t bytes = r.text.size();
        SourceFile file(lp, std::move(r.text));
        std::vector<LaunchLink> links = catalog_.launchLinks(file);
        if (diagnostics && named) checkLaunchSettings(file, links, *diagnostics);
        for (auto& link : links) targets.push_back({std::move(link.script), std::move(link.configFile), std::move(link.facts)});
        if (keep) mentions->rememberLaunch(key, stamp, bytes, targets);
      }
      fs::path dir = fs::path(lp).parent_path();
      // Launch commands run from the repository root or the script's folder: try the
      // script's folder and its ancestors, then the current directory.
      auto locate = [&](const std::string& written) -> std::optional<std::string> {
        fs::path base = dir;
        for (int up = 0; up < 4; ++up) {
          fs::path p = (base / written).lexically_normal();
          std::error_code ec;
          if (fs::is_regular_file(p, ec)) return p.string();
          if (base.empty() || !base.has_parent_path() || base.parent_path() == base) break;
          base = base.parent_path();
        }
        std::error_code ec;
        if (fs::is_regular_file(written, ec)) return written;
        return std::nullopt;
      };
      for (const auto& link : targets) {
        if (link.script.empty()) continue;
        auto script = locate(link.script);
        if (!script) continue;
        Facts merged;
        if (!link.configFile.empty())
          if (auto cfg = locate(link.configFile))
            if (const Facts* f = factsOfConfig(*cfg)) merged = *f;
        for (const auto& [k, v] : link.facts) merged[k] = v;  // flags override the file
        if (!merged.empty()) out[absolutePathKey(*script)] = std::move(merged);
      }
    }
  }
  // 2. Explicit configs apply to every script without its own link.
  const Facts* explicitConfig = nullptr;
  for (const auto& c : options_.accelerateConfigs)
    if (const Facts* f = factsOfConfig(c); f && !f->empty()) explicitConfig = f;
  if (explicitConfig) out[""] = *explicitConfig;
  // 3. Else a project's only accelerate FSDP config applies to its scripts: found in the project, not
  // among the named files, so that a script linted alone gets the same config. 4. Scripts in no
  // project: the only one among the named files.
  auto onlyOne = [](const std::vector<const Facts*>& found) -> const Facts* {
    const Facts* only = nullptr;
    int count = 0;
    for (const Facts* f : found)
      if (f && !f->empty()) only = f, ++count;
    return count == 1 ? only : nullptr;
  };
  if (const Facts* only = onlyOne(named)) out["named"] = *only;
  for (const auto& [dir, files] : projects) {
    std::vector<const Facts*> found;
    for (const auto& c : files.configs) {
      if (auto it = configFacts.find(absolutePathKey(c)); it != configFacts.end()) {
        found.push_back(&it->second);
        continue;
      }
      // The config rules' words first: most files are not configs.
      std::optional<FileStamp> stamp = mentions ? mentions->stampOf(c) : std::nullopt;
      if (mentions && mentions->knownQuiet(c, stamp)) continue;
      if (mentions && mentions->knownMentioning(c, stamp)) {  // not read again: its facts are kept too
        found.push_back(factsOfConfig(c));
        continue;
      }
      ReadResult r = readSource(c, options_);
      if (r.skipped || contentProblem(r.text, options_.maxFileBytes)) continue;
      bool mentioned = mentionsConfigWord(r.text);
      if (mentions) mentions->remember(c, stamp, r.text.size(), mentioned);
      if (mentioned) found.push_back(factsOfConfig(c));
    }
    if (const Facts* only = onlyOne(found)) out["project:" + dir] = *only;
  }

  return out;
}

bool isConfigPath(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  return ext == ".yaml" || ext == ".yml" || ext == ".json";
}

std::optional<Linter::ConfigDoc> Linter::readConfig(const std::string& path, std::string text, LintStats& stats,
                                                   Facts* facts) const {
  // Pre-scan: only files that mention a word the config rules need are parsed.
  if (!mentionsConfigWord(text)) {
    ++stats.filesSkipped;
    return std::nullopt;
  }
  ++stats.filesAnalysed;
  ++stats.filesParsed;
  ConfigDoc doc;
  doc.file = std::make_unique<SourceFile>(path, std::move(text));
  try {
    doc.docs = config::parseYaml(*doc.file);
  } catch (const config::YamlError& e) {
    if (const RuleInfo* info = catalog_.find("SL001"); info && options_.selection.enabled(*info))
      doc.found.push_back(engineDiagnostic(*info, *doc.file, {e.offset, e.offset},
                                           std::string("syntax error: ") + e.what() +
                                               "; the file could not be parsed, so its settings were not checked"));
  }
  if (!doc.docs.empty() && facts && catalog_.configFacts) *facts = catalog_.configFacts(*doc.file, doc.docs);
  return doc;
}

bool isMarkdownPath(const std::string& path) { return std::filesystem::path(path).extension() == ".md"; }

namespace {

// Whether some line of a block reads as a mapping entry (`key: value`, `"key": value`, `- key: value`,
// `{"key": value`):
// the blocks worth parsing as YAML.
bool looksLikeMapping(const std::vector<std::string_view>& lines) {
  for (std::string_view l : lines) {
    size_t i = l.find_first_not_of(" \t");
    if (i == std::string_view::npos) continue;
    if (l[i] == '-' && i + 1 < l.size() && l[i + 1] == ' ') i = l.find_first_not_of(" \t", i + 1);
    if (i != std::string_view::npos && l[i] == '{') i = l.find_first_not_of(" \t", i + 1);  // `{"key": ...}`
    if (i == std::string_view::npos) continue;
    char quote = l[i] == '"' || l[i] == '\'' ? l[i] : 0;
    if (quote) ++i;
    size_t start = i;
    while (i < l.size() && (std::isalnum(static_cast<unsigned char>(l[i])) || l[i] == '_' || l[i] == '-' || l[i] == '.'))
      ++i;
    if (i == start || (!std::isalpha(static_cast<unsigned char>(l[start])) && l[start] != '_')) continue;
    if (quote && (i >= l.size() || l[i++] != quote)) continue;
    if (i < l.size() && l[i] == ':' && (i + 1 == l.size() || l[i + 1] == ' ' || l[i + 1] == '\t' || l[i + 1] == '\r'))
      return true;
  }
  return false;
}

// `<!-- shardlint: disable=SL301 -->` (or `noqa`, `disable-file`, no codes: every rule) on the lines
// right above a fence: the whole block, as the `#` directive `# shardlint: disable-file=...` in it.
std::vector<std::pair<std::string, uint32_t>> htmlDirectives(std::string_view text, const std::vector<uint32_t>& starts,
                                                             uint32_t fenceLine) {
  std::vector<std::pair<std::string, uint32_t>> out;
  for (uint32_t l = fenceLine; l-- > 0;) {
    std::string_view line = config::spanLines(text, starts, {l, l + 1})[0];
    size_t open = line.find("<!--");
    size_t close = line.rfind("-->");
    if (open == std::string_view::npos || close == std::string_view::npos || close < open + 4 ||
        line.find_first_not_of(" \t") != open)
      break;
    std::string_view body = line.substr(open + 4, close - open - 4);
    size_t b = body.find_first_not_of(" \t");
    if (b == std::string_view::npos) break;
    body.remove_prefix(b);
    std::string low;
    for (char c : body.substr(0, 10)) low += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (low != "shardlint:") break;
    std::string_view rest = body.substr(10);
    size_t w = rest.find_first_not_of(" \t");
    rest.remove_prefix(w == std::string_view::npos ? rest.size() : w);
    size_t word = 0;
    while (word < rest.size() && (std::isalpha(static_cast<unsigned char>(rest[word])) || rest[word] == '-')) ++word;
    std::string directive(rest.substr(0, word));
    for (char& c : directive) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (directive != "disable" && directive != "disable-file" && directive != "disable-next-line" && directive != "noqa")
      break;
    rest.remove_prefix(word);
    size_t c = rest.find_first_not_of(" \t=:");
    std::string codes(c == std::string_view::npos ? std::string_view() : rest.substr(c));
    while (!codes.empty() && (codes.back() == ' ' || codes.back() == '\t')) codes.pop_back();
    out.emplace_back("# shardlint: disable-file" + (codes.empty() ? std::string() : "=" + codes),
                     starts[l] + static_cast<uint32_t>(open));
  }
  return out;
}

}  // namespace

std::vector<Linter::ConfigDoc> Linter::readMarkdown(const std::string& path, const std::string& text, LintStats& stats,
                                                    std::vector<Diagnostic>& out) const {
  std::vector<ConfigDoc> docs;
  // Byte pre-scan: a fence and a word the config rules need, else nothing is scanned.
  if (!config::mayHaveFences(text) || !mentionsConfigWord(text)) {
    ++stats.filesSkipped;
    return docs;
  }
  std::vector<config::FencedBlock> blocks = config::fencedBlocks(text);
  std::vector<uint32_t> starts = config::lineStarts(text);
  bool analysed = false;
  // One span parsed as YAML: a ConfigDoc when it holds documents.
  auto tryYaml = [&](config::LineSpan span, const std::vector<std::pair<std::string, uint32_t>>& directives) {
    ConfigDoc doc;
    doc.file = std::make_unique<SourceFile>(path, config::spanView(text, starts, span, true));
    try {
      doc.docs = config::parseYaml(*doc.file);
    } catch (const config::YamlError&) {
      return false;  // a partial or shell block: documentation, not a config
    }
    if (std::none_of(doc.docs.begin(), doc.docs.end(), [](const config::YNode& n) { return n.isMap(); })) return false;
    doc.directives = directives;
    docs.push_back(std::move(doc));
    analysed = true;
    return true;
  };
  for (const auto& b : blocks) {
    if (b.content.first >= b.content.end) continue;
    std::vector<std::string_view> lines = config::spanLines(text, starts, b.content);
    uint32_t from = starts[b.content.first];
    uint32_t to = b.content.end < starts.size() ? starts[b.content.end] : static_cast<uint32_t>(text.size());
    if (!mentionsConfigWord(std::string_view(text).substr(from, to - from))) continue;
    auto directives = htmlDirectives(text, starts, b.fenceLine);
    if (looksLikeMapping(lines) && tryYaml(b.content, directives)) continue;
    // Not a config itself: the configs a shell block writes (here-documents), and its launch commands.
    if (b.language == "python" || b.language == "py" || b.language == "yaml" || b.language == "yml" ||
        b.language == "json")
      continue;
    for (const auto& body : config::hereDocuments(text, starts, b.content))
      if (looksLikeMapping(config::spanLines(text, starts, body))) tryYaml(body, directives);
    if (catalog_.launchLinks) {
      SourceFile view(path, config::spanView(text, starts, b.content, true));
      std::vector<LaunchLink> links = catalog_.launchLinks(view);
      if (!links.empty()) {
        analysed = true;
        size_t before = out.size();
        checkLaunchSettings(view, links, out, &directives);
        for (size_t i = before; i < out.size(); ++i) out[i].fix.reset();  // no fixes in documentation
      }
    }
  }
  if (analysed) ++stats.filesAnalysed, stats.filesParsed += docs.size();
  else ++stats.filesSkipped;
  return docs;
}

void Linter::checkConfig(ConfigDoc& doc, std::vector<Diagnostic>& out, const Facts* project) const {
  if (!doc.docs.empty()) {
    ConfigContext cx(*doc.file, doc.docs, doc.found, project);
    runConfigRules(cx);
  }
  Suppressions sup(doc.file.get());
  sup.addHashComments(*doc.file);
  for (const auto& [comment, offset] : doc.directives) sup.addComment(comment, offset);
  bool markdown = isMarkdownPath(doc.file->path);
  for (auto& d : doc.found) {
    if (markdown) d.fix.reset();  // fixes edit configuration files, not the documentation showing one
    if (!sup.suppresses(d, catalog_)) out.push_back(std::move(d));
  }
  for (auto& d : sup.problems(catalog_, options_.selection, options_.reportUnusedNoqa)) out.push_back(std::move(d));
}

}  // namespace shardlint
