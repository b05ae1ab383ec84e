// The fixture runner: every file under fixtures/python, fixtures/config and fixtures/markdown is linted
// with all rules;
// every finding must be expected inline and every expectation found.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "Fixtures.h"
#include "TestSupport.h"
#include "Registry.h"
#include "cxx/CxxFrontend.h"
#include "driver/Linter.h"

namespace fs = std::filesystem;
using shardlint::testing::readFile;
using shardlint::testing::Expectation;

namespace {

std::vector<fs::path> fixtureFiles() {
  std::vector<fs::path> out;
  for (const char* dir : {"python", "config", "markdown"}) {
    fs::path root = fs::path(SHARDLINT_SOURCE_DIR) / "fixtures" / dir;
    if (!fs::exists(root)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      std::string ext = e.path().extension().string();
      if (ext == ".py" || ext == ".yaml" || ext == ".yml" || ext == ".json" || ext == ".sh" || ext == ".md")
        out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// JSON has no comments: its expectations live in `<file>.expected`, one `LINE:COL CODE` per line.
std::vector<Expectation> sidecarExpectations(const fs::path& file) {
  std::vector<Expectation> out;
  std::ifstream in(file.string() + ".expected");
  std::string line;
  static const std::regex re(R"(^(\d+):(\d+)\s+(SL\d{3})(?:\s*:\s*(.*))?$)");
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, re)) continue;
    Expectation e;
    e.line = static_cast<uint32_t>(std::stoul(m[1]));
    e.column = static_cast<uint32_t>(std::stoul(m[2]));
    e.code = m[3];
    if (m[4].matched && !m[4].str().empty()) e.messageRegex = m[4].str();
    out.push_back(e);
  }
  return out;
}

// Every finding of `diags` that lies in `path` must match one expectation (code, line, column and the
// message regex), and every expectation must be matched.
void checkExpectations(const std::string& name, const std::vector<shardlint::Diagnostic>& diags,
                       const std::vector<Expectation>& expected, const std::string* onlyPath = nullptr) {
  std::vector<bool> matched(expected.size(), false);
  for (const auto& d : diags) {
    if (onlyPath && d.location.path != *onlyPath) continue;
    uint32_t line = d.location.start.line + 1, col = d.location.start.codepointColumn + 1;
    auto it = std::find_if(expected.begin(), expected.end(), [&](const Expectation& e) {
      size_t i = static_cast<size_t>(&e - expected.data());
      return !matched[i] && e.code == d.code && e.line == line && e.column == col &&
             (!e.messageRegex || std::regex_search(d.message, std::regex(*e.messageRegex)));
    });
    INFO("unexpected finding " << name << ":" << line << ":" << col << ": " << d.code << " " << d.message);
    CHECK(it != expected.end());
    if (it != expected.end()) matched[static_cast<size_t>(it - expected.begin())] = true;
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("missing finding " << name << ":" << expected[i].line << ":" << expected[i].column << ": "
                            << expected[i].code);
    CHECK(matched[i]);
  }
}

}  // namespace

TEST_CASE("fixtures: every finding expected, every expectation found", "[fixtures]") {
  const auto& catalog = shardlint::rules::catalog();
  shardlint::Linter linter(catalog, {});
  auto files = fixtureFiles();
  REQUIRE(!files.empty());
  for (const auto& path : files) {
    DYNAMIC_SECTION(path.filename().string()) {
      std::string text = readFile(path);
      auto expected = path.extension() == ".json" ? sidecarExpectations(path)
                                                  : shardlint::testing::parseExpectations(text);
      std::string name = path.filename().string();
      std::string stem = path.stem().string();
      bool ok = stem.size() > 3 && stem.substr(stem.size() - 3) == "_ok";
      if (ok) {
        INFO("an _ok fixture must not contain expectations");
        CHECK(expected.empty());
      } else {
        INFO("a positive fixture must expect its own rule " << name.substr(0, 5));
        CHECK(std::any_of(expected.begin(), expected.end(),
                          [&](const Expectation& e) { return e.code == name.substr(0, 5); }));
      }
      checkExpectations(name, linter.lintText(name, text), expected);
    }
  }
}

// The C++ fixtures (fixtures/cxx/*.cpp): whole LibTorch programs, linted together (in parallel) with
// the real LibTorch headers through the default compile flags. Expectations as in Python, with `//`.
TEST_CASE("fixtures: C++ units with the real LibTorch headers", "[fixtures][cxx]") {
  if (!shardlint::cxx::available()) {
    WARN("this build has no C++ frontend (SHARDLINT_CXX off or Clang not found): C++ fixtures not run");
    return;
  }
  std::vector<std::string> paths;
  for (const auto& e : fs::directory_iterator(fs::path(SHARDLINT_SOURCE_DIR) / "fixtures" / "cxx"))
    if (e.path().extension() == ".cpp") paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  REQUIRE(paths.size() >= 2);
  // Linted once: Catch2 runs the test case again for each section below.
  static shardlint::LintStats stats;
  static const std::vector<shardlint::Diagnostic> diags = [&] {
    shardlint::LintOptions options;
    options.jobs = 2;
    shardlint::Linter linter(shardlint::rules::catalog(), options);
    return linter.lintFiles(paths, &stats);
  }();
  CHECK(stats.cxxParsed == paths.size());
  for (const auto& path : paths) {
    std::string name = fs::path(path).filename().string();
    DYNAMIC_SECTION(name) {
      auto expected = shardlint::testing::parseExpectations(readFile(path));
      bool ok = name.find("_ok.cpp") != std::string::npos;
      CHECK(ok == expected.empty());
      checkExpectations(name, diags, expected, &path);
    }
  }
  // Findings in the shared header would point outside the fixtures.
  for (const auto& d : diags) CHECK(d.location.path.find("confirm.h") == std::string::npos);
}

// Units Clang cannot parse completely (fixtures/cxx/incomplete/: not LibTorch programs the
// confirmation build compiles, since they include a header that does not exist or do not compile),
// with the real LibTorch headers: a missing third-party header is an SL002 note and no SL001, a rule
// finding in code parsed without error stays and one in code using the missing header's names is
// withheld; a real syntax error is still SL001.
TEST_CASE("fixtures: C++ units with a missing header or a syntax error", "[fixtures][cxx]") {
  if (!shardlint::cxx::available()) {
    WARN("this build has no C++ frontend (SHARDLINT_CXX off or Clang not found): C++ fixtures not run");
    return;
  }
  std::vector<std::string> paths;
  for (const auto& e : fs::directory_iterator(fs::path(SHARDLINT_SOURCE_DIR) / "fixtures" / "cxx" / "incomplete"))
    if (e.path().extension() == ".cpp") paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  REQUIRE(paths.size() >= 3);
  static shardlint::LintStats stats;
  static const std::vector<shardlint::Diagnostic> diags = [&] {
    shardlint::LintOptions options;
    options.jobs = 2;
    shardlint::Linter linter(shardlint::rules::catalog(), options);
    return linter.lintFiles(paths, &stats);
  }();
  CHECK(stats.cxxParsed == paths.size());
  for (const auto& path : paths) {
    std::string name = fs::path(path).filename().string();
    DYNAMIC_SECTION(name) {
      auto expected = shardlint::testing::parseExpectations(readFile(path));
      CHECK(!expected.empty());
      checkExpectations(name, diags, expected, &path);
    }
  }
  for (const auto& d : diags)
    if (d.code == "SL002") CHECK(d.severity == shardlint::Severity::Info);
}
