// The fixture runner: every file under fixtures/python is linted with all rules;
// every finding must be expected inline and every expectation found.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "Fixtures.h"
#include "Registry.h"
#include "driver/Linter.h"

namespace fs = std::filesystem;
using shardlint::testing::Expectation;

namespace {

std::vector<fs::path> fixtureFiles() {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(SHARDLINT_SOURCE_DIR) / "fixtures" / "python"))
    if (e.path().extension() == ".py") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string readAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("fixtures: every finding expected, every expectation found", "[fixtures]") {
  const auto& catalog = shardlint::rules::catalog();
  shardlint::Linter linter(catalog, {});
  auto files = fixtureFiles();
  REQUIRE(!files.empty());
  for (const auto& path : files) {
    DYNAMIC_SECTION(path.filename().string()) {
      std::string text = readAll(path);
      auto expected = shardlint::testing::parseExpectations(text);
      std::string name = path.filename().string();
      bool ok = name.size() > 6 && name.substr(name.size() - 6) == "_ok.py";
      if (ok) {
        INFO("an _ok fixture must not contain expectations");
        CHECK(expected.empty());
      } else {
        INFO("a positive fixture must expect its own rule " << name.substr(0, 5));
        CHECK(std::any_of(expected.begin(), expected.end(),
                          [&](const Expectation& e) { return e.code == name.substr(0, 5); }));
      }
      auto diags = linter.lintText(name, text);
      std::vector<bool> matched(expected.size(), false);
      for (const auto& d : diags) {
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
  }
}
