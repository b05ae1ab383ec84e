// `shardlint check examples/` reports exactly the seeded bugs listed in examples/expected.txt.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "Registry.h"
#include "driver/Discovery.h"
#include "driver/Linter.h"

TEST_CASE("examples: the seeded bugs and nothing else", "[examples]") {
  namespace fs = std::filesystem;
  fs::path root(SHARDLINT_SOURCE_DIR);
  std::set<std::string> expected;
  std::ifstream in(root / "examples" / "expected.txt");
  REQUIRE(in);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') expected.insert(line);
  REQUIRE(!expected.empty());

  fs::path cwd = fs::current_path();
  fs::current_path(root);
  auto found = shardlint::discover({"examples"});
  shardlint::Linter linter(shardlint::rules::catalog(), {});
  std::set<std::string> actual;
  for (const auto& f : found.files)
    for (const auto& d : linter.lintPath(f))
      actual.insert(d.location.path + ":" + std::to_string(d.location.start.line + 1) + " " + d.code);
  fs::current_path(cwd);
  CHECK(found.files.size() >= 8);
  CHECK(actual == expected);
}
