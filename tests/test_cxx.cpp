// The C++ frontend and the C++ side of the driver: flags discovery, SL001 for a unit that does not
// compile, `//` suppressions, the outputs. Most cases use a small stand-in for LibTorch's API (the
// names SL501 knows, nothing else), so each unit parses in milliseconds; fixtures/cxx/ (test_fixtures)
// runs the rule on the real LibTorch headers.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "Registry.h"
#include "TestSupport.h"
#include "cxx/CxxFrontend.h"
#include "driver/CxxPrecompiled.h"
#include "driver/Linter.h"

namespace fs = std::filesystem;
using shardlint::testing::runShell;
using shardlint::testing::shellQuote;
using shardlint::testing::TempDir;

namespace {

// The LibTorch names SL501 looks for, declared in a header of a few lines.
const char* const kMiniTorch = R"(#pragma once
#include <memory>
#include <string>
#include <vector>
namespace torch {
struct Tensor {};
namespace nn {
struct Module {
  virtual ~Module() = default;
  std::vector<Tensor> parameters() const { return {}; }
  template <class M> std::shared_ptr<M> register_module(std::string, std::shared_ptr<M> m) { return m; }
  Tensor register_parameter(std::string, Tensor t, bool = true) { return t; }
};
}  // namespace nn
namespace optim {
struct Optimizer {
  void step() {}
  void zero_grad() {}
};
struct SGD : Optimizer {
  SGD(std::vector<Tensor>, double) {}
};
}  // namespace optim
}  // namespace torch
)";

// A program with one SL501 finding (the optimizer on line 8, column 21).
const char* const kBuggy = R"(#include <torch/mini.h>
struct Net : torch::nn::Module {
  void grow() { register_parameter("w", torch::Tensor{}); }
};

int main() {
  Net net;
  torch::optim::SGD opt(net.parameters(), 0.1);
  net.grow();
  opt.step();
}
)";

struct Project : TempDir {
  Project() : TempDir("shardlint-cxx-") { write("include/torch/mini.h", kMiniTorch); }
  std::string include() const { return "-I" + (path() / "include").string(); }
  std::vector<shardlint::Diagnostic> lint(const std::vector<std::string>& rel, std::vector<std::string> flags = {},
                                          shardlint::LintStats* stats = nullptr) const {
    shardlint::LintOptions options;
    options.cxxFlags = std::move(flags);
    options.jobs = 2;
    shardlint::Linter linter(shardlint::rules::catalog(), options);
    std::vector<std::string> paths;
    for (const auto& r : rel) paths.push_back((path() / r).string());
    return linter.lintFiles(paths, stats);
  }
};

std::string codes(const std::vector<shardlint::Diagnostic>& ds) {
  std::string out;
  for (const auto& d : ds)
    out += d.code + "@" + fs::path(d.location.path).filename().string() + ":" +
           std::to_string(d.location.start.line + 1) + ":" + std::to_string(d.location.start.codepointColumn + 1) +
           " ";
  return out;
}

}  // namespace

TEST_CASE("cxx: compile flags come from compile_commands.json, compile_flags.txt, `--`, or the default",
          "[cxx]") {
  if (!shardlint::cxx::available()) return;
  SECTION("compile_commands.json in a build/ folder above the file") {
    Project p;
    p.write("src/train.cpp", kBuggy);
    nlohmann::json db = nlohmann::json::array();
    db.push_back({{"directory", (p.path() / "build").string()},
                  {"file", (p.path() / "src" / "train.cpp").string()},
                  {"command", "/usr/bin/c++ " + p.include() + " -std=c++17 -o train.o -c " +
                                  (p.path() / "src" / "train.cpp").string()}});
    p.write("build/compile_commands.json", db.dump());
    auto flags = shardlint::cxx::findFlags((p.path() / "src" / "train.cpp").string(), {}, {});
    CHECK(flags.origin.find("compile_commands.json") != std::string::npos);
    CHECK(std::find(flags.args.begin(), flags.args.end(), p.include()) != flags.args.end());
    CHECK(std::find(flags.args.begin(), flags.args.end(), "-c") == flags.args.end());
    CHECK(codes(p.lint({"src/train.cpp"})) == "SL501@train.cpp:8:21 ");
  }
  SECTION("compile_flags.txt") {
    Project p;
    p.write("train.cpp", kBuggy);
    p.write("compile_flags.txt", p.include() + "\n-std=c++17\n");
    CHECK(codes(p.lint({"train.cpp"})) == "SL501@train.cpp:8:21 ");
  }
  SECTION("flags given after `--`, and without any: the default, where the header is not found") {
    Project p;
    p.write("train.cpp", kBuggy);
    CHECK(codes(p.lint({"train.cpp"}, {p.include()})) == "SL501@train.cpp:8:21 ");
    auto found = p.lint({"train.cpp"});
    REQUIRE(found.size() == 1);
    CHECK(found[0].code == "SL001");
    CHECK(found[0].message.find("'torch/mini.h' file not found") != std::string::npos);
    CHECK(found[0].message.find("compile flags from the default") != std::string::npos);
  }
}

TEST_CASE("cxx: a unit that does not compile gets one SL001 and the other units are analysed", "[cxx]") {
  if (!shardlint::cxx::available()) return;
  Project p;
  p.write("good.cpp", kBuggy);
  p.write("bad.cpp", std::string("#include <torch/mini.h>\n// optim register_module\nint main() { undeclared(); }\n"));
  shardlint::LintStats stats;
  auto found = p.lint({"bad.cpp", "good.cpp"}, {p.include()}, &stats);
  CHECK(codes(found) == "SL001@bad.cpp:3:14 SL501@good.cpp:8:21 ");
  CHECK(found[0].message.find("use of undeclared identifier 'undeclared'") != std::string::npos);
  CHECK(stats.cxxParsed == 2);
}

TEST_CASE("cxx: units no rule may apply to are not parsed", "[cxx]") {
  if (!shardlint::cxx::available()) return;
  Project p;
  p.write("plain.cpp", "#include <vector>\nint main() { std::vector<int> v; return (int)v.size(); }\n");
  p.write("no_registration.cpp", "#include <torch/mini.h>\nint main() { torch::optim::SGD s({}, 0.1); s.step(); }\n");
  shardlint::LintStats stats;
  CHECK(p.lint({"plain.cpp", "no_registration.cpp"}, {p.include()}, &stats).empty());
  CHECK(stats.cxxUnits == 2);
  CHECK(stats.cxxParsed == 0);
}

TEST_CASE("cxx: a header's registration is found through the unit that includes it", "[cxx]") {
  if (!shardlint::cxx::available()) return;
  Project p;
  p.write("net.h",
          "#pragma once\n#include <torch/mini.h>\nstruct Net : torch::nn::Module {\n"
          "  void grow() { register_parameter(\"w\", torch::Tensor{}); }\n};\n");
  p.write("train.cpp",
          "#include \"net.h\"\nint main() {\n  Net net;\n  torch::optim::SGD opt(net.parameters(), 0.1);\n"
          "  net.grow();\n  opt.zero_grad();\n}\n");
  auto found = p.lint({"train.cpp"}, {p.include()});
  REQUIRE(found.size() == 1);
  CHECK(codes(found) == "SL501@train.cpp:4:21 ");
  REQUIRE(found[0].notes.size() == 3);
  CHECK(fs::path(found[0].notes[1].location.path).filename() == "net.h");
  CHECK(found[0].notes[1].location.start.line == 3);
}

TEST_CASE("cxx: `// noqa` and `// shardlint: disable=` suppress, and an unused directive is SL003", "[cxx]") {
  if (!shardlint::cxx::available()) return;
  Project p;
  std::string noqa = kBuggy;
  noqa.replace(noqa.find("0.1);"), 5, "0.1);  // noqa: SL501");
  p.write("noqa.cpp", noqa);
  std::string disable = kBuggy;
  disable.replace(disable.find("  torch::optim::SGD"), 0, "  // shardlint: disable=SL501\n");
  p.write("disable.cpp", disable);
  std::string unused = std::string(kBuggy) + "// shardlint: disable=SL501\nint unused_below = 0;\n";
  p.write("unused.cpp", unused);
  CHECK(codes(p.lint({"noqa.cpp", "disable.cpp", "unused.cpp"}, {p.include()})) ==
        "SL501@unused.cpp:8:21 SL003@unused.cpp:12:1 ");
}

TEST_CASE("cxx: findings in JSON and SARIF (validated), with the notes", "[cxx][formats]") {
  if (!shardlint::cxx::available()) return;
  Project p;
  p.write("train.cpp", kBuggy);
  std::string cd = "cd " + shellQuote(p.path().string()) + " && " + shellQuote(SHARDLINT_BINARY);
  auto json = runShell(cd + " check --no-cache --format json train.cpp -- " + shellQuote(p.include()));
  CHECK(json.code == 1);
  auto j = nlohmann::json::parse(json.out);
  REQUIRE(j["findings"].size() == 1);
  CHECK(j["findings"][0]["code"] == "SL501");
  CHECK(j["findings"][0]["notes"].size() == 3);
  // the sarif tests fail on their own when the checker's Python is missing
  if (!fs::exists(shardlint::testing::sarifCheckPython())) return;
  auto sarif = runShell(cd + " check --no-cache --format sarif train.cpp -- " + shellQuote(p.include()) +
                        " > out.sarif; " + shardlint::testing::sarifCheckCommand() + " out.sarif 2>&1");
  INFO(sarif.out);
  CHECK(sarif.code == 0);
}

TEST_CASE("cxx: the system includes a unit starts with, for a precompiled header", "[cxx][pch]") {
  using shardlint::leadingSystemIncludes;
  CHECK(leadingSystemIncludes("// a comment\n\n#include <torch/torch.h>\n#  include  <vector> // why\nint x;\n") ==
        "#include <torch/torch.h>\n#include <vector>\n");
  CHECK(leadingSystemIncludes("\xEF\xBB\xBF/* a\n block */\n#include <a.h>\r\n/* c */ #include <b.h>\n") ==
        "#include <a.h>\n#include <b.h>\n");
  // Stops at the first line that is not a system include: a quoted include, a macro, code.
  CHECK(leadingSystemIncludes("#include <a.h>\n#include \"local.h\"\n#include <b.h>\n") == "#include <a.h>\n");
  CHECK(leadingSystemIncludes("#define NDEBUG\n#include <a.h>\n") == "");
  CHECK(leadingSystemIncludes("#include <a.h> /* x */\n") == "");
  CHECK(leadingSystemIncludes("#include <a.h\n") == "");
  CHECK(leadingSystemIncludes("#include <>\n") == "");
  CHECK(leadingSystemIncludes("#include <a.h> \\\n") == "");
  CHECK(leadingSystemIncludes("/* never closed\n#include <a.h>\n") == "");
  CHECK(leadingSystemIncludes("") == "");
}

namespace {
// A project whose LibTorch stand-in lives outside it (a library folder), linted with a cache
// folder, so that its units get a precompiled header. The units are in src/: a unit's folder and
// the one above it are the project, and the library is elsewhere under the temporary folder.
struct PchProject : Project {
  TempDir library{"shardlint-cxx-lib-"};
  PchProject() { library.write("include/torch/mini.h", kMiniTorch); }
  std::string libraryInclude() const { return "-I" + (library.path() / "include").string(); }
  fs::path pchDir() const { return path() / "cache" / "cxx-pch"; }
  size_t count(const std::string& ext) const {
    size_t n = 0;
    std::error_code ec;
    for (fs::directory_iterator it(pchDir(), ec), end; !ec && it != end; it.increment(ec))
      n += it->path().extension() == ext;
    return n;
  }
  std::vector<shardlint::Diagnostic> lintCached(const std::vector<std::string>& rel, shardlint::LintStats& stats,
                                                std::vector<std::string> flags = {}) const {
    shardlint::LintOptions options;
    options.cxxFlags = flags.empty() ? std::vector<std::string>{libraryInclude()} : std::move(flags);
    options.jobs = 2;
    options.pchCacheDir = (path() / "cache").string();
    options.cacheKey = "test";
    shardlint::Linter linter(shardlint::rules::catalog(), options);
    std::vector<std::string> paths;
    for (const auto& r : rel) paths.push_back((path() / "src" / r).string());
    stats = {};
    return linter.lintFiles(paths, &stats);
  }
};
}  // namespace

TEST_CASE("cxx: precompiled headers are built once, reused, and never change the findings", "[cxx][pch]") {
  if (!shardlint::cxx::available()) return;
  PchProject p;
  p.write("src/a.cpp", kBuggy);
  p.write("src/b.cpp", std::string("// the same headers, another unit\n") + kBuggy);
  p.write("src/bad.cpp", "#include <torch/mini.h>\n// optim register_module\nint main() { undeclared(); }\n");
  const std::string expected = "SL501@a.cpp:8:21 SL501@b.cpp:9:21 SL001@bad.cpp:3:14 ";
  shardlint::LintStats stats;
  SECTION("one build for the units that share headers and flags, then loaded by later runs") {
    CHECK(codes(p.lintCached({"a.cpp", "b.cpp", "bad.cpp"}, stats)) == expected);
    CHECK(stats.cxxPchBuilt == 1);
    CHECK(stats.cxxPchUsed == 2);  // bad.cpp fails with it and is parsed again without it
    CHECK(p.count(".pch") == 1);
    CHECK(fs::exists(p.path() / "cache" / ".gitignore"));
    CHECK(codes(p.lintCached({"a.cpp", "b.cpp", "bad.cpp"}, stats)) == expected);
    CHECK(stats.cxxPchBuilt == 0);
    CHECK(stats.cxxPchUsed == 2);
    CHECK(p.count(".pch") == 1);  // a unit that does not compile does not discard it
    // Other flags, another precompiled header; for one unit, only the second time it is asked for.
    CHECK(codes(p.lintCached({"a.cpp"}, stats, {p.libraryInclude(), "-DOTHER"})) == "SL501@a.cpp:8:21 ");
    CHECK(stats.cxxPchBuilt + stats.cxxPchUsed == 0);
    CHECK(p.count(".seen") == 1);
    CHECK(codes(p.lintCached({"a.cpp"}, stats, {p.libraryInclude(), "-DOTHER"})) == "SL501@a.cpp:8:21 ");
    CHECK(stats.cxxPchBuilt == 1);
    CHECK(stats.cxxPchUsed == 1);
    CHECK(p.count(".pch") == 2);
    CHECK(p.count(".seen") == 0);
  }
  SECTION("a header changed since: Clang refuses the precompiled header, the findings stay, the next run rebuilds") {
    CHECK(codes(p.lintCached({"a.cpp", "b.cpp", "bad.cpp"}, stats)) == expected);
    p.library.write("include/torch/mini.h", std::string(kMiniTorch) + "namespace torch { struct Added {}; }\n");
    CHECK(codes(p.lintCached({"a.cpp", "b.cpp", "bad.cpp"}, stats)) == expected);
    CHECK(stats.cxxPchUsed == 0);
    CHECK(p.count(".pch") == 0);
    CHECK(codes(p.lintCached({"a.cpp", "b.cpp", "bad.cpp"}, stats)) == expected);
    CHECK(stats.cxxPchBuilt == 1);
    CHECK(stats.cxxPchUsed == 2);
  }
  SECTION("headers that reach the project's own files are not precompiled (the model needs their bodies)") {
    p.write("include/torch/mini.h", kMiniTorch);  // in the project this time (p.include())
    CHECK(codes(p.lintCached({"a.cpp", "b.cpp", "bad.cpp"}, stats, {p.include()})) == expected);
    CHECK(stats.cxxPchBuilt == 0);
    CHECK(stats.cxxPchUsed == 0);
    CHECK(p.count(".pch") == 0);
    CHECK(p.count(".none") == 1);
    CHECK(codes(p.lintCached({"a.cpp", "b.cpp", "bad.cpp"}, stats, {p.include()})) == expected);
    CHECK(stats.cxxPchBuilt == 0);  // the refusal is remembered
  }
  SECTION("units without a leading system include, and --no-cache, get none") {
    p.write("src/quoted.cpp", std::string("#include \"torch/mini.h\"\n") + (std::strchr(kBuggy, '\n') + 1));
    CHECK(codes(p.lintCached({"quoted.cpp"}, stats)) == "SL501@quoted.cpp:8:21 ");
    CHECK(stats.cxxPchBuilt + stats.cxxPchUsed == 0);
    p.lint({"src/a.cpp"}, {p.libraryInclude()}, &stats);
    CHECK(stats.cxxPchBuilt + stats.cxxPchUsed == 0);
    CHECK(!fs::exists(p.pchDir()));
  }
}

TEST_CASE("cxx: only the most recently used precompiled headers are kept", "[cxx][pch]") {
  TempDir cache("shardlint-pch-");
  fs::path dir = cache.path() / "cxx-pch";
  auto now = fs::file_time_type::clock::now();
  for (int i = 0; i < 14; ++i) {
    std::string key = "k" + std::to_string(100 + i);
    cache.write(fs::path("cxx-pch") / (key + ".h"), "#include <vector>\n");
    fs::path pch = cache.write(fs::path("cxx-pch") / (key + ".pch"), "x");
    fs::last_write_time(pch, now - std::chrono::minutes(100 - i));  // k113 is the newest
  }
  shardlint::PchStore store(cache.path(), "test");
  CHECK(!store.path("k100").empty());  // used now: the newest
  store.trim(12);
  CHECK(fs::exists(dir / "k100.pch"));
  CHECK(fs::exists(dir / "k100.h"));
  CHECK(!fs::exists(dir / "k101.pch"));  // the two oldest go, with their headers
  CHECK(!fs::exists(dir / "k101.h"));
  CHECK(!fs::exists(dir / "k102.pch"));
  CHECK(fs::exists(dir / "k103.pch"));
  CHECK(fs::exists(dir / "k113.pch"));
  CHECK(store.path("k101").empty());
}

// LLVM installs a signal stack from malloc in the thread that first registers a temporary file for
// deletion on a crash, as the PCH build does; ASan unmapped it when the worker thread ended and
// aborted the run (found by the ASan run of the SARIF test). The thread keeps its own.
TEST_CASE("cxx: building a precompiled header on a worker thread leaves its signal stack alone", "[cxx][pch]") {
  if (!shardlint::cxx::available()) return;
  PchProject p;
  fs::path header = p.write("cache/h.h", "#include <torch/mini.h>\n");
  bool ok = false;
  bool same = false;
  std::thread worker([&] {
    std::vector<char> own(1 << 16);
    stack_t mine{};
    mine.ss_sp = own.data();
    mine.ss_size = own.size();
    stack_t before{};
    sigaltstack(&mine, &before);
    shardlint::cxx::CompileFlags flags;
    flags.args = {"-std=c++17", p.libraryInclude()};
    flags.directory = p.path().string();
    ok = shardlint::cxx::buildPch(header.string(), flags, (p.path() / "cache" / "h.pch").string(), {}).ok;
    stack_t after{};
    sigaltstack(nullptr, &after);
    same = after.ss_sp == own.data() && after.ss_size == own.size();
    before.ss_flags &= SS_DISABLE;
    sigaltstack(&before, nullptr);  // the sanitizer's own again, for the thread's end
  });
  worker.join();
  CHECK(ok);
  CHECK(same);
}
