// The rule registry: sorted, unique, documented, and every rule has fixtures.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <string>

#include "Registry.h"

namespace fs = std::filesystem;

namespace {
struct FixtureCount {
  int positive = 0;
  int negative = 0;
};

FixtureCount fixturesFor(std::string_view code) {
  FixtureCount c;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(SHARDLINT_SOURCE_DIR) / "fixtures")) {
    std::string name = e.path().filename().string();
    std::string ext = e.path().extension().string();
    if (name.rfind(std::string(code) + "_", 0) != 0 ||
        (ext != ".py" && ext != ".yaml" && ext != ".yml" && ext != ".json" && ext != ".sh" && ext != ".cpp" &&
         ext != ".md"))
      continue;
    std::string stem = e.path().stem().string();
    bool ok = stem.size() > 3 && stem.substr(stem.size() - 3) == "_ok";
    (ok ? c.negative : c.positive)++;
  }
  return c;
}
}  // namespace

TEST_CASE("registry: codes and names are unique and sorted", "[registry]") {
  const auto& cat = shardlint::rules::catalog();
  REQUIRE(!cat.infos.empty());
  std::set<std::string_view> names;
  for (size_t i = 0; i < cat.infos.size(); ++i) {
    const auto& info = cat.infos[i];
    INFO(info.code);
    CHECK(info.code.size() == 5);
    CHECK(info.code.substr(0, 2) == "SL");
    if (i > 0) CHECK(cat.infos[i - 1].code < info.code);
    CHECK(names.insert(info.name).second);
    CHECK(std::all_of(info.name.begin(), info.name.end(), [](char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-'; }));
    CHECK(cat.find(info.code) == &info);
    CHECK(cat.find(info.name) == &info);
  }
  auto rules = cat.makeRules();
  for (const auto& r : rules) CHECK(cat.find(r->info().code) != nullptr);
}

TEST_CASE("registry: every rule has a doc page with the required sections", "[registry]") {
  for (const auto& info : shardlint::rules::catalog().infos) {
    INFO(info.code);
    std::string doc(info.doc);
    REQUIRE(!doc.empty());
    CHECK(doc.rfind("# " + std::string(info.code) + " " + std::string(info.name), 0) == 0);
    size_t last = 0;
    for (const char* heading : {"## What it does", "## Why is this bad", "## Example", "## Use instead", "## Fix",
                                "## Limitations", "## How to silence", "## References"}) {
      size_t at = doc.find(heading);
      INFO(heading);
      CHECK(at != std::string::npos);
      CHECK(at >= last);
      if (at != std::string::npos) last = at;
    }
  }
}

TEST_CASE("registry: every rule has positive and _ok fixtures", "[registry]") {
  for (const auto& info : shardlint::rules::catalog().infos) {
    INFO(info.code);
    FixtureCount c = fixturesFor(info.code);
    CHECK(c.positive >= 1);
    CHECK(c.negative >= 1);
    if (info.code.substr(0, 3) == "SL1") {  // the seed rules: at least 15 of each
      CHECK(c.positive >= 15);
      CHECK(c.negative >= 15);
    }
  }
}
