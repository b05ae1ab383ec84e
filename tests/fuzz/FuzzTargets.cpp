#include "FuzzTargets.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "Registry.h"
#include "config/Yaml.h"
#include "core/SourceFile.h"
#include "driver/Config.h"
#include "driver/Linter.h"
#include "driver/Settings.h"
#include "lsp/Server.h"
#include "output/Emitters.h"

namespace shardlint::fuzz {

namespace fs = std::filesystem;

namespace {

std::string asText(const uint8_t* data, size_t size) {
  return size ? std::string(reinterpret_cast<const char*>(data), size) : std::string();
}

// A broken invariant is a bug like a crash: say which, and abort (libFuzzer saves the input).
void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "shardlint fuzz: invariant broken: %s\n", what);
  std::abort();
}

// Every finding about `path` lies inside its text, and every emitter can write the findings.
void checkFindings(const std::vector<Diagnostic>& diags, const std::string& path, size_t textSize) {
  for (const auto& d : diags) {
    require(!d.code.empty(), "a finding without a code");
    require(d.location.range.begin <= d.location.range.end, "a finding's range ends before it begins");
    if (d.location.path == path) require(d.location.range.end <= textSize, "a finding's range is past the text");
    require(d.location.start.line <= d.location.end.line, "a finding ends on a line before its start");
  }
  std::ostringstream out;
  output::writeJson(out, diags, {1, diags.empty() ? 0u : 1u}, "fuzz");
  output::writeText(out, diags, {1, diags.empty() ? 0u : 1u}, {});
  output::writeGithub(out, diags);
  for (const auto& d : diags) (void)output::lspDiagnostic(d, nullptr, d.location.start.line % 2 == 0,
                                                          [](const std::string& p) { return output::fileUri(p); });
}

// The YAML model of `text` with every scalar resolved the way PyYAML would (no recursion:
// nesting depth is the parser's business).
void walkYaml(const std::string& path, const std::string& text) {
  SourceFile file(path, text);
  std::vector<config::YNode> docs;
  try {
    docs = config::parseYaml(file);
  } catch (const config::YamlError& e) {
    require(e.offset <= text.size(), "a YAML error offset past the text");
    return;
  }
  std::vector<const config::YNode*> todo;
  for (const auto& d : docs) todo.push_back(&d);
  while (!todo.empty()) {
    const config::YNode* n = todo.back();
    todo.pop_back();
    require(n->range.begin <= n->range.end && n->range.end <= text.size(), "a YAML node's range is off the text");
    if (n->isScalar() || n->kind == config::YNode::Kind::Null) {
      config::Resolved r = config::resolveYaml11(*n);
      (void)config::typeName(r.type);
    }
    for (const auto& [k, v] : n->entries) todo.push_back(&k), todo.push_back(&v);
    for (const auto& it : n->items) todo.push_back(&it);
  }
  if (rules::catalog().configFacts) (void)rules::catalog().configFacts(file, docs);
}

int fuzzConfig(const uint8_t* data, size_t size, const char* path) {
  std::string text = asText(data, size);
  LintOptions o;
  o.reportUnusedNoqa = true;
  Linter linter(rules::catalog(), o);
  checkFindings(linter.lintText(path, text), path, text.size());
  if (!contentProblem(text, o.maxFileBytes)) walkYaml(path, text);
  return 0;
}

// A folder of this process's own under the system temp folder, emptied before each use and
// removed at exit.
class Scratch {
 public:
  const fs::path& fresh() {
    std::error_code ec;
    if (dir_.empty()) {
      std::string tmpl = (fs::temp_directory_path(ec) / "shardlint-fuzz-XXXXXX").string();
      if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
      dir_ = tmpl;
    }
    std::vector<fs::path> old;
    for (const auto& e : fs::directory_iterator(dir_, ec)) old.push_back(e.path());
    for (const auto& p : old) fs::remove_all(p, ec);
    return dir_;
  }
  ~Scratch() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

 private:
  fs::path dir_;
};

// A file name from a `### ` header: its last 3 [A-Za-z0-9_.-] components, no `.`/`..`, always relative.
std::string cleanName(std::string_view raw, size_t index) {
  std::vector<std::string> parts(1);
  for (char c : raw.substr(0, 80)) {
    if (c == '/') parts.emplace_back();
    else if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-') parts.back() += c;
  }
  parts.erase(std::remove_if(parts.begin(), parts.end(),
                             [](const std::string& p) { return p.empty() || p == "." || p == ".."; }),
              parts.end());
  if (parts.size() > 3) parts.erase(parts.begin(), parts.end() - 3);
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "/") + p;
  if (out.empty()) out = "m" + std::to_string(index) + ".py";
  return out;
}

}  // namespace

int fuzzPython(const uint8_t* data, size_t size) {
  static const char* const kPath = "fuzz/train.py";
  std::string text = asText(data, size);
  LintOptions o;
  o.reportUnusedNoqa = true;
  switch (size % 3) {  // the settings the rules interpret, chosen by the input (deterministic)
    case 1: o.settingsFacts = {{"fsdp-version", "1"}, {"optimizers", "helpers.make_optimizer"}}; break;
    case 2: o.settingsFacts = {{"fsdp-version", "2"}, {"wraps", "helpers.shard_model"}}; break;
    default: break;
  }
  Linter linter(rules::catalog(), o);
  checkFindings(linter.lintText(kPath, text), kPath, text.size());
  checkFindings(linter.syntaxFindings(kPath, text), kPath, text.size());
  return 0;
}

int fuzzYaml(const uint8_t* data, size_t size) { return fuzzConfig(data, size, "fuzz/accelerate_fsdp.yaml"); }

int fuzzJson(const uint8_t* data, size_t size) { return fuzzConfig(data, size, "fuzz/fsdp_config.json"); }

int fuzzSettings(const uint8_t* data, size_t size) {
  std::string text = asText(data, size);
  bool pyproject = text.find("[tool.") != std::string::npos;
  fs::path file = pyproject ? "/fuzz/project/pyproject.toml" : "/fuzz/project/.shardlint.toml";
  std::optional<FileConfig> cfg;
  try {
    cfg = configFromText(text, file, pyproject);
  } catch (const std::runtime_error&) {  // the message the user sees
    return 0;
  }
  if (!cfg) return 0;
  (void)describeConfig(*cfg);
  LintOptions options;
  try {
    options = lintOptionsFrom(rules::catalog(), *cfg, SettingsOverrides{});
  } catch (const std::invalid_argument&) {  // an unknown rule selector
    return 0;
  } catch (const std::runtime_error&) {  // `severity` names an unknown rule
    return 0;
  }
  const RuleCatalog& catalog = rules::catalog();
  for (const char* p : {"src/pkg/train.py", "train.py", "a/b/c/configs/fsdp.yaml", ""}) (void)isExcluded(*cfg, p);
  std::vector<Diagnostic> diags;
  for (const char* code : {"SL101", "SL301", "SL002"}) {
    Diagnostic d;
    if (const RuleInfo* info = catalog.find(code)) d = makeDiagnostic(*info, Location{}, "fuzz");
    d.location.path = std::string("src/pkg/") + code + ".py";
    diags.push_back(std::move(d));
  }
  applyFindingSettings(catalog, *cfg, diags);
  // The settings the rules interpret reach the analysis of a small script.
  options.jobs = 1;
  options.roots.clear();
  options.accelerateConfigs.clear();
  Linter linter(catalog, options);
  static const std::string kScript =
      "import torch\nfrom helpers import make_optimizer, shard_model\n"
      "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
      "model = torch.nn.Linear(2, 2)\noptimizer = make_optimizer(model.parameters())\n"
      "model = shard_model(model)\nmodel = FSDP(model)\n";
  checkFindings(linter.lintText("fuzz/train.py", kScript), "fuzz/train.py", kScript.size());
  return 0;
}

int fuzzLsp(const uint8_t* data, size_t size) {
  // The client's bytes in an in-memory file: poll() says readable, read() ends with EOF, so
  // the server reads the whole session and never waits for more input.
  int in = ::memfd_create("shardlint-fuzz-lsp", MFD_CLOEXEC);
  require(in >= 0, "memfd_create failed");
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(in, data + done, size - done);
    require(n > 0, "writing the LSP input failed");
    done += static_cast<size_t>(n);
  }
  ::lseek(in, 0, SEEK_SET);
  static const int out = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  require(out >= 0, "cannot open /dev/null");
  int rc = lsp::runServer(rules::catalog(), in, out);
  require(rc == 0 || rc == 1, "the server returned an exit code other than 0 or 1");
  ::close(in);
  return 0;
}

std::vector<std::pair<std::string, std::string>> splitProject(const std::string& input) {
  constexpr size_t kMaxFiles = 8;
  std::vector<std::pair<std::string, std::string>> files;
  size_t pos = 0;
  std::string name = "train.py";
  std::string body;
  auto add = [&] {
    if (files.size() >= kMaxFiles) return;
    for (auto& f : files)
      if (f.first == name) {  // a repeated name: the later text wins
        f.second = body;
        return;
      }
    files.emplace_back(name, body);
  };
  bool any = false;
  while (pos <= input.size()) {
    size_t nl = input.find('\n', pos);
    std::string_view line(input.data() + pos, (nl == std::string::npos ? input.size() : nl) - pos);
    if (line.substr(0, 4) == "### ") {
      if (any || !body.empty()) add();
      name = cleanName(line.substr(4), files.size());
      body.clear();
      any = true;
    } else {
      body.append(line);
      if (nl != std::string::npos) body += '\n';
    }
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  add();
  return files;
}

int fuzzProject(const uint8_t* data, size_t size) {
  static Scratch scratch;
  std::string input = asText(data, size);
  const fs::path& dir = scratch.fresh();
  std::vector<std::string> paths;
  for (const auto& [name, body] : splitProject(input)) {
    fs::path p = dir / name;
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
    if (fs::is_directory(p, ec)) continue;  // `a` after `a/b.py`
    std::ofstream(p, std::ios::binary) << body;
    std::string ext = p.extension().string();
    if (ext != ".toml" && ext != ".cfg") paths.push_back(p.string());  // settings files shape the roots only
  }
  LintOptions o;
  o.jobs = 1;
  o.reportUnusedNoqa = true;
  Linter linter(rules::catalog(), o);
  LintStats stats;
  std::vector<Diagnostic> diags = linter.lintFiles(paths, &stats);
  for (const auto& d : diags)
    require(d.location.range.begin <= d.location.range.end, "a finding's range ends before it begins");
  checkFindings(diags, "", 0);
  return 0;
}

const std::vector<Target>& targets() {
  static const std::vector<Target> all = {
      {"python", fuzzPython}, {"yaml", fuzzYaml}, {"json", fuzzJson},
      {"settings", fuzzSettings}, {"lsp", fuzzLsp}, {"project", fuzzProject},
  };
  return all;
}

}  // namespace shardlint::fuzz
