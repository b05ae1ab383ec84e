#include "driver/Requirements.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>
#include <sys/stat.h>
#include <toml++/toml.h>

namespace fs = std::filesystem;

namespace shardlint {

std::string normalizePackageName(std::string_view name) {
  std::string out;
  bool sep = false;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      sep = true;
      continue;
    }
    if (sep && !out.empty()) out += '-';
    sep = false;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

namespace {

constexpr size_t kMaxDependencyFileBytes = size_t{1} << 20;

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

bool nameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; }

// A PEP 508 line ("name[extra] >=1.0, <2 ; marker", "name (>=1.0)", "name @ url") or, with `conda`,
// a conda spec ("channel::name=1.0", "name 1.0.*"): the package and its specifier.
bool parseSpecLine(std::string_view line, bool conda, std::string& name, std::string& spec) {
  std::string s = trim(line);
  if (s.empty() || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  if (conda) {
    size_t colons = s.find("::");
    if (colons != std::string::npos) s = s.substr(colons + 2);
  }
  size_t i = 0;
  while (i < s.size() && nameChar(s[i])) ++i;
  name = s.substr(0, i);
  std::string rest = s.substr(i);
  if (size_t semi = rest.find(';'); semi != std::string::npos) rest = rest.substr(0, semi);
  rest = trim(rest);
  if (!rest.empty() && rest[0] == '[') {  // extras
    size_t close = rest.find(']');
    rest = close == std::string::npos ? std::string() : trim(rest.substr(close + 1));
  }
  if (!rest.empty() && rest[0] == '@') rest.clear();  // a direct reference: no version to read
  if (rest.size() >= 2 && rest.front() == '(' && rest.back() == ')') rest = trim(rest.substr(1, rest.size() - 2));
  if (conda && !rest.empty() && std::isdigit(static_cast<unsigned char>(rest[0]))) rest = "=" + rest;
  rest.erase(std::remove_if(rest.begin(), rest.end(), [](unsigned char c) { return std::isspace(c); }), rest.end());
  spec = rest;
  return !name.empty();
}

void add(Requirements& out, const std::string& name, const std::string& spec, const fs::path& file, int line) {
  out[normalizePackageName(name)].push_back(Requirement{spec, file.generic_string(), line});
}

void addSpecLine(Requirements& out, std::string_view text, bool conda, const fs::path& file, int line) {
  std::string name, spec;
  if (parseSpecLine(text, conda, name, spec)) add(out, name, spec, file, line);
}

// The files read for the folder RequirementsIndex::forDirectory is reading (its lock is held), for their stamps.
thread_local std::vector<fs::path>* tFilesRead = nullptr;

std::optional<std::string> readSmallFile(const fs::path& p) {
  if (tFilesRead) tFilesRead->push_back(p);
  std::error_code ec;
  auto size = fs::file_size(p, ec);
  if (ec || size > kMaxDependencyFileBytes) return std::nullopt;
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void parseRequirementsTxt(const fs::path& file, const std::string& text, Requirements& out, int depth);

void includeRequirements(const fs::path& from, const std::string& target, Requirements& out, int depth) {
  if (depth >= 4 || target.empty()) return;  // `-r` chains (and cycles) end somewhere
  fs::path p = from.parent_path() / target;
  if (auto text = readSmallFile(p)) parseRequirementsTxt(p.lexically_normal(), *text, out, depth + 1);
}

void parseRequirementsTxt(const fs::path& file, const std::string& text, Requirements& out, int depth) {
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (size_t hash = line.find(" #"); hash != std::string::npos) line.resize(hash);
    std::string s = trim(line);
    if (s.empty() || s[0] == '#') continue;
    if (s[0] == '-') {
      for (const char* opt : {"-r", "--requirement", "-c", "--constraint"}) {
        std::string o(opt);
        if (s.compare(0, o.size(), o) == 0 && s.size() > o.size() && (std::isspace(static_cast<unsigned char>(s[o.size()])) || s[o.size()] == '=')) {
          includeRequirements(file, trim(s.substr(o.size() + 1)), out, depth);
          break;
        }
      }
      continue;
    }
    addSpecLine(out, s, false, file, n);
  }
}

int lineOf(const toml::node& node) { return static_cast<int>(node.source().begin.line); }

void addTomlArray(const toml::node* node, const fs::path& file, Requirements& out) {
  const toml::array* arr = node ? node->as_array() : nullptr;
  if (!arr) return;
  for (const auto& item : *arr)
    if (auto s = item.value<std::string>()) addSpecLine(out, *s, false, file, lineOf(item));
}

void parsePyproject(const fs::path& file, const std::string& text, Requirements& out) {
  toml::table doc;
  try {
    doc = toml::parse(text, file.string());
  } catch (const toml::parse_error&) {
    return;
  }
  if (const toml::table* project = doc["project"].as_table()) {
    addTomlArray(project->get("dependencies"), file, out);
    if (const toml::table* extras = (*project)["optional-dependencies"].as_table())
      for (const auto& [k, v] : *extras) addTomlArray(&v, file, out);
  }
  if (const toml::table* groups = doc["dependency-groups"].as_table())
    for (const auto& [k, v] : *groups) addTomlArray(&v, file, out);
  // Poetry: `name = "^2.0"` or `name = { version = "^2.0", ... }`, also in groups.
  auto poetryTable = [&](const toml::table* deps) {
    if (!deps) return;
    for (const auto& [k, v] : *deps) {
      std::string name(k.str());
      if (name == "python") continue;
      if (auto s = v.value<std::string>()) {
        add(out, name, *s == "*" ? std::string() : *s, file, lineOf(v));
      } else if (const toml::table* t = v.as_table()) {
        auto ver = (*t)["version"].value<std::string>();
        add(out, name, ver && *ver != "*" ? *ver : std::string(), file, lineOf(v));
      }
    }
  };
  if (const toml::table* poetry = doc["tool"]["poetry"].as_table()) {
    poetryTable((*poetry)["dependencies"].as_table());
    poetryTable((*poetry)["dev-dependencies"].as_table());
    if (const toml::table* groups = (*poetry)["group"].as_table())
      for (const auto& [k, v] : *groups)
        if (const toml::table* g = v.as_table()) poetryTable((*g)["dependencies"].as_table());
  }
}

// setup.cfg: [options] install_requires and [options.extras_require], values on continuation lines.
void parseSetupCfg(const fs::path& file, const std::string& text, Requirements& out) {
  std::istringstream in(text);
  std::string line, section;
  bool inList = false;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (size_t hash = line.find(" #"); hash != std::string::npos) line.resize(hash);
    std::string s = trim(line);
    if (s.empty() || s[0] == '#' || s[0] == ';') continue;
    bool indented = std::isspace(static_cast<unsigned char>(line[0]));
    if (!indented && s.front() == '[' && s.back() == ']') {
      section = trim(s.substr(1, s.size() - 2));
      inList = false;
      continue;
    }
    if (!indented) {
      size_t eq = s.find_first_of("=:");
      inList = false;
      if (eq == std::string::npos) continue;
      std::string key = trim(s.substr(0, eq)), value = trim(s.substr(eq + 1));
      inList = (section == "options" && key == "install_requires") || section == "options.extras_require";
      if (inList && !value.empty()) addSpecLine(out, value, false, file, n);
      continue;
    }
    if (inList) addSpecLine(out, s, false, file, n);
  }
}

void parseEnvironmentYml(const fs::path& file, const std::string& text, Requirements& out) {
  YAML::Node doc;
  try {
    doc = YAML::Load(text);
  } catch (const YAML::Exception&) {
    return;
  }
  try {
    if (!doc.IsMap() || !doc["dependencies"] || !doc["dependencies"].IsSequence()) return;
    for (const auto& item : doc["dependencies"]) {
      if (item.IsScalar()) {
        addSpecLine(out, item.Scalar(), true, file, item.Mark().line + 1);
      } else if (item.IsMap() && item["pip"] && item["pip"].IsSequence()) {
        for (const auto& p : item["pip"])
          if (p.IsScalar()) addSpecLine(out, p.Scalar(), false, file, p.Mark().line + 1);
      }
    }
  } catch (const YAML::Exception&) {
  }
}

// ---- `pip install` lines of shell scripts ----------------------------------------------------------

// A word of a shell command: its text without quotes, the 1-based line where it starts, and whether
// it is an operator that ends a command (`;`, `&&`, `||`, `|`, `&`, a parenthesis, a line end).
struct ShellWord {
  std::string text;
  int line = 0;
  bool op = false;
};

// The words of a script, quotes removed and comments dropped. A redirection (`> file`, `2>&1`,
// `< file`) is dropped with its target: unquoted, `accelerate>=0.33` is `accelerate` with its output
// redirected to a file `=0.33`, which is what the shell runs. A here-document's body is skipped.
std::vector<ShellWord> shellWords(const std::string& text) {
  std::vector<ShellWord> out;
  std::string cur;
  bool inWord = false, redirectTarget = false;
  int line = 1, wordLine = 1;
  std::vector<std::string> heredocs;  // delimiters whose bodies start after the current line
  auto finish = [&]() {
    if (!inWord) return;
    if (!redirectTarget) out.push_back(ShellWord{cur, wordLine, false});
    redirectTarget = false;
    cur.clear();
    inWord = false;
  };
  auto op = [&]() {
    finish();
    redirectTarget = false;
    if (out.empty() || !out.back().op) out.push_back(ShellWord{"", line, true});
  };
  auto start = [&]() {
    if (!inWord) inWord = true, wordLine = line;
  };
  size_t i = 0, n = text.size();
  while (i < n) {
    char c = text[i];
    if (c == '\n') {
      op();
      ++line;
      ++i;
      // Here-documents opened on the line just ended: skip their bodies.
      for (const auto& delim : heredocs) {
        while (i < n) {
          size_t eol = text.find('\n', i);
          std::string body = trim(std::string_view(text).substr(i, eol == std::string::npos ? std::string::npos : eol - i));
          i = eol == std::string::npos ? n : eol + 1;
          ++line;
          if (body == delim) break;
        }
      }
      heredocs.clear();
      continue;
    }
    if (c == '\\' && i + 1 < n) {
      if (text[i + 1] == '\n') {  // a continuation line
        finish();
        ++line;
        i += 2;
        continue;
      }
      start();
      cur += text[i + 1];
      i += 2;
      continue;
    }
    if (c == '\'' || c == '"') {
      start();
      size_t close = i + 1;
      while (close < n && text[close] != c) {
        if (c == '"' && text[close] == '\\' && close + 1 < n) ++close;
        if (text[close] == '\n') ++line;
        ++close;
      }
      for (size_t k = i + 1; k < close && k < n; ++k)
        if (!(c == '"' && text[k] == '\\' && k + 1 < close && std::string_view("\"\\$`").find(text[k + 1]) != std::string_view::npos))
          cur += text[k];
      i = close < n ? close + 1 : n;
      continue;
    }
    if (c == '#' && !inWord) {  // a comment runs to the end of the line
      while (i < n && text[i] != '\n') ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      finish();
      ++i;
      continue;
    }
    if (c == ';' || c == '&' || c == '|' || c == '(' || c == ')') {
      if (c == '&' && i > 0 && (text[i - 1] == '>' || text[i - 1] == '<')) {  // 2>&1: part of a redirection
        ++i;
        continue;
      }
      op();
      ++i;
      continue;
    }
    if (c == '<' || c == '>') {
      if (c == '<' && i + 1 < n && text[i + 1] == '<' && (i + 2 >= n || text[i + 2] != '<')) {
        // A here-document: `<<WORD`, `<<-WORD`, `<< 'WORD'`, `<<"WORD"`.
        size_t k = i + 2;
        if (k < n && text[k] == '-') ++k;
        while (k < n && (text[k] == ' ' || text[k] == '\t')) ++k;
        std::string delim;
        while (k < n && !std::isspace(static_cast<unsigned char>(text[k])) && text[k] != ';' && text[k] != '|' &&
               text[k] != '&' && text[k] != ')') {
          if (text[k] != '\'' && text[k] != '"') delim += text[k];
          ++k;
        }
        finish();
        if (!delim.empty()) heredocs.push_back(delim);
        i = k;
        continue;
      }
      // A file-descriptor number right before the operator (`2>`) belongs to the redirection.
      if (inWord && !cur.empty() && std::all_of(cur.begin(), cur.end(), [](unsigned char d) { return std::isdigit(d); })) {
        cur.clear();
        inWord = false;
      }
      finish();
      while (i < n && (text[i] == '<' || text[i] == '>' || text[i] == '&')) ++i;
      redirectTarget = true;
      // `>&2`, `2>&1`: the target is a descriptor, already consumed with the digits below.
      if (i < n && std::isdigit(static_cast<unsigned char>(text[i])) && i > 0 && text[i - 1] == '&') {
        while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
        redirectTarget = false;
      }
      continue;
    }
    start();
    cur += c;
    ++i;
  }
  op();
  return out;
}

bool isPipProgram(std::string_view w) {
  std::string_view base = w.substr(w.find_last_of('/') == std::string_view::npos ? 0 : w.find_last_of('/') + 1);
  if (base.substr(0, 3) != "pip") return false;
  return std::all_of(base.begin() + 3, base.end(), [](unsigned char c) { return std::isdigit(c) || c == '.'; });
}

bool isPythonProgram(std::string_view w) {
  std::string_view base = w.substr(w.find_last_of('/') == std::string_view::npos ? 0 : w.find_last_of('/') + 1);
  if (base.substr(0, 6) != "python") return false;
  return std::all_of(base.begin() + 6, base.end(), [](unsigned char c) { return std::isdigit(c) || c == '.'; });
}

// pip options that take a value in the next word (unless written `--opt=value`, or `-rFILE`).
bool pipOptionTakesValue(std::string_view w) {
  static const std::set<std::string_view> options = {
      "-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-t", "--target", "-i", "--index-url",
      "--extra-index-url", "-f", "--find-links", "--prefix", "--root", "--src", "--upgrade-strategy",
      "--progress-bar", "--platform", "--python-version", "--implementation", "--abi", "--no-binary",
      "--only-binary", "-C", "--config-settings", "--global-option", "--build-option", "--install-option",
      "--trusted-host", "--proxy", "--cache-dir", "--log", "--timeout", "--retries", "--exists-action", "--cert",
      "--client-cert", "--report", "--python", "--keyring-provider", "--use-feature", "--use-deprecated",
      "--group", "--index-strategy", "-p"};
  return options.count(w) > 0;
}

// The packages a `pip install` command names: its requirement arguments, without options, `-r`/`-c`
// files, editable installs, paths, archives and URLs. A version written with a shell variable is
// unknown: the package counts as declared without a version.
void addPipArguments(const std::vector<ShellWord>& words, size_t from, const fs::path& file, Requirements& out) {
  bool optionsEnd = false;
  for (size_t i = from; i < words.size() && !words[i].op; ++i) {
    const std::string& w = words[i].text;
    if (w.empty()) continue;
    if (!optionsEnd && w == "--") {
      optionsEnd = true;
      continue;
    }
    if (!optionsEnd && w[0] == '-') {
      if (pipOptionTakesValue(w)) ++i;  // skip its value
      continue;
    }
    if (w.find("://") != std::string::npos || w.find('/') != std::string::npos || w[0] == '.' || w[0] == '$' ||
        w[0] == '~')
      continue;  // a URL, a path, a variable
    bool archive = false;
    for (std::string_view ext : {".whl", ".tar.gz", ".zip", ".tgz"})
      archive = archive || (w.size() > ext.size() && w.compare(w.size() - ext.size(), ext.size(), ext) == 0);
    std::string name, spec;
    if (archive || !parseSpecLine(w, false, name, spec)) continue;
    if (spec.find('$') != std::string::npos || spec.find('`') != std::string::npos) spec.clear();
    add(out, name, spec, file, words[i].line);
  }
}

// `pip install ...`, `pip3 install ...`, `python -m pip install ...`, `uv pip install ...` lines.
void parseShellScript(const fs::path& file, const std::string& text, Requirements& out) {
  if (text.find("pip") == std::string::npos) return;
  std::vector<ShellWord> words = shellWords(text);
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i].op) continue;
    size_t next = std::string::npos;
    if (isPipProgram(words[i].text)) {
      next = i + 1;
    } else if (isPythonProgram(words[i].text)) {  // python [-flags] -m pip
      size_t k = i + 1;
      while (k < words.size() && !words[k].op && words[k].text != "-m" && !words[k].text.empty() &&
             words[k].text[0] == '-')
        ++k;
      if (k + 1 < words.size() && words[k].text == "-m" && !words[k + 1].op && words[k + 1].text == "pip") next = k + 2;
    } else if (words[i].text == "uv" && i + 1 < words.size() && !words[i + 1].op && words[i + 1].text == "pip") {
      next = i + 2;
    }
    if (next == std::string::npos) continue;
    // pip's own options may come before the command (`pip --no-cache-dir install`).
    while (next < words.size() && !words[next].op && !words[next].text.empty() && words[next].text[0] == '-') ++next;
    if (next < words.size() && !words[next].op && words[next].text == "install") {
      addPipArguments(words, next + 1, file, out);
      i = next;
    }
  }
}

bool isRequirementsTxt(const std::string& name) {
  return name.size() > 4 && name.compare(name.size() - 4, 4, ".txt") == 0 && name.rfind("requirements", 0) == 0;
}

bool isDependencyFile(const std::string& name) {
  return isRequirementsTxt(name) || name == "pyproject.toml" || name == "setup.cfg" || name == "environment.yml" ||
         name == "environment.yaml";
}

bool isShellScript(const std::string& name) { return name.size() > 3 && name.compare(name.size() - 3, 3, ".sh") == 0; }

// What a folder holds for the walk: its dependency files (and those of its `requirements/` folder),
// and its shell scripts, each sorted.
struct FolderFiles {
  std::vector<fs::path> dependencies;
  std::vector<fs::path> scripts;
};

FolderFiles filesIn(const fs::path& dir) {
  FolderFiles out;
  std::error_code ec;
  bool hasSub = false;  // an entry named `requirements` (not a regular file): listed below
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code fe;
    std::string name = it->path().filename().string();
    if (!it->is_regular_file(fe)) {
      hasSub = hasSub || name == "requirements";
      continue;
    }
    if (isDependencyFile(name)) out.dependencies.push_back(it->path());
    else if (isShellScript(name)) out.scripts.push_back(it->path());
  }
  if (hasSub) {
    fs::path sub = dir / "requirements";
    for (fs::directory_iterator it(sub, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code fe;
      std::string name = it->path().filename().string();
      if (it->is_regular_file(fe) && name.size() > 4 && name.compare(name.size() - 4, 4, ".txt") == 0)
        out.dependencies.push_back(it->path());
    }
  }
  std::sort(out.dependencies.begin(), out.dependencies.end());
  std::sort(out.scripts.begin(), out.scripts.end());
  return out;
}

void append(Requirements& to, Requirements from) {
  for (auto& [k, v] : from) to[k].insert(to[k].end(), std::make_move_iterator(v.begin()), std::make_move_iterator(v.end()));
}

}  // namespace

Requirements parseRequirementsFile(const fs::path& file, const std::string& text) {
  Requirements out;
  std::string name = file.filename().string();
  if (name == "pyproject.toml") parsePyproject(file, text, out);
  else if (name == "setup.cfg") parseSetupCfg(file, text, out);
  else if (name == "environment.yml" || name == "environment.yaml") parseEnvironmentYml(file, text, out);
  else if (isShellScript(name)) parseShellScript(file, text, out);
  else parseRequirementsTxt(file, text, out, 0);
  return out;
}

RequirementsIndex::Stamp RequirementsIndex::stampOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  auto ns = [](const timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; };
  return Stamp{true, static_cast<uint64_t>(st.st_size), ns(st.st_mtim), ns(st.st_ctim)};
}

void RequirementsIndex::revalidate() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [path, stamp] : read_)
    if (stamp.existence ? stampOf(path).exists != stamp.exists : !(stampOf(path) == stamp)) {
      cache_.clear();
      read_.clear();
      return;
    }
}

const Requirements& RequirementsIndex::forDirectory(const fs::path& start) {
  std::lock_guard<std::mutex> lock(mu_);
  static const Requirements none;
  // Walk up to the folder that ends the walk (dependency files, the repository's top, /) or to one whose
  // answer is known, reading each folder's own declarations on the way.
  struct Step {
    std::string key;
    Requirements own;
  };
  std::vector<Step> steps;
  std::shared_ptr<const Requirements> above;  // the known answer the walk reached, when it did not end on its own
  if (auto it = cache_.find(start.native()); it != cache_.end()) return *it->second;  // asked before, as spelled
  fs::path dir = start.lexically_normal();
  for (int n = 0; n < 64 && !dir.empty(); ++n) {
    std::string key = dir.string();
    if (auto it = cache_.find(key); it != cache_.end()) {
      above = it->second;
      break;
    }
    FolderFiles files = filesIn(dir);
    Step step{key, {}};
    std::vector<fs::path> filesRead;
    {
      struct Recording {
        explicit Recording(std::vector<fs::path>* to) { tFilesRead = to; }
        ~Recording() { tFilesRead = nullptr; }
      } recording(&filesRead);
      for (const auto* list : {&files.dependencies, &files.scripts})
        for (const auto& f : *list)
          if (auto text = readSmallFile(f)) append(step.own, parseRequirementsFile(f, *text));
    }
    for (const std::string& listed : {key, (dir / "requirements").string()}) read_.emplace(listed, stampOf(listed));
    // Only whether `.git` is there counts (git changes the folder's times all the time).
    Stamp git = stampOf((dir / ".git").string());
    read_.emplace((dir / ".git").string(), Stamp{git.exists, 0, 0, 0, true});
    for (const auto& f : filesRead) read_.emplace(f.string(), stampOf(f.string()));
    steps.push_back(std::move(step));
    std::error_code ec;
    if (!files.dependencies.empty() || fs::exists(dir / ".git", ec) || dir.parent_path() == dir) break;
    dir = dir.parent_path();
  }
  if (steps.empty()) return above ? *above : none;
  // From the top down: a folder's own declarations first, then those that apply to the folder above
  // (shared, not copied, by a folder that declares nothing).
  std::shared_ptr<const Requirements> inherited = above ? above : std::make_shared<const Requirements>();
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (!it->own.empty()) {
      auto mine = std::make_shared<Requirements>(std::move(it->own));
      append(*mine, *inherited);
      inherited = std::move(mine);
    }
    cache_[it->key] = inherited;
  }
  return *cache_[steps.front().key];
}

}  // namespace shardlint
