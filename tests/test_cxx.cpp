// The C++ frontend and the C++ side of the driver: flags discovery, SL001 for a unit that does not
// compile, `//` suppressions, the outputs. Most cases use a small stand-in for LibTorch's API (the
// names SL501 knows, nothing else), so each unit parses in milliseconds; fixtures/cxx/ (test_fixtures)
// runs the rule on the real LibTorch headers.
#include <signal.h>

#include <atomic>
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
#include "driver/ClangGate.h"
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
    // Not found: an SL002 note (not SL001) that names the header, where the flags came from and
    // how to pass others. Nothing of LibTorch's stand-in is declared, so there is nothing to find.
    auto found = p.lint({"train.cpp"});
    REQUIRE(found.size() == 1);
    CHECK(codes(found) == "SL002@train.cpp:1:10 ");
    CHECK(found[0].severity == shardlint::Severity::Info);
    CHECK(found[0].message.find("header `torch/mini.h` was not found") != std::string::npos);
    CHECK(found[0].message.find("compile flags from the default") != std::string::npos);
    CHECK(found[0].message.find("`shardlint check PATH -- -I DIR`") != std::string::npos);
    CHECK(found[0].message.find("compile_commands.json") != std::string::npos);
    CHECK(found[0].message.find("later Clang error(s) may come from it") != std::string::npos);
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

namespace {
// A program with one SL501 finding in `train_plain` (line 8, column 21 after two include lines), and
// `extra` (code that may use the missing header's names) after it.
std::string withMissing(const std::string& includes, const std::string& extra) {
  return includes +
         "struct Net : torch::nn::Module {\n"
         "  void grow() { register_parameter(\"w\", torch::Tensor{}); }\n"
         "};\n"
         "void train_plain() {\n"
         "  Net net;\n"
         "  torch::optim::SGD opt(net.parameters(), 0.1);\n"
         "  net.grow();\n"
         "  opt.step();\n"
         "}\n" +
         extra;
}
const char* const kTwoIncludes = "#include <torch/mini.h>\n#include <nowhere/cli.h>\n";

const shardlint::Diagnostic* firstOf(const std::vector<shardlint::Diagnostic>& ds, const std::string& code) {
  for (const auto& d : ds)
    if (d.code == code) return &d;
  return nullptr;
}
}  // namespace

TEST_CASE("cxx: a header that is not found is an SL002 note, not SL001, and the rest is analysed", "[cxx]") {
  if (!shardlint::cxx::available()) return;
  Project p;
  SECTION("correct code using the missing header's names: the note only") {
    p.write("train.cpp", withMissing(kTwoIncludes, "int main(int argc, char** argv) {\n  cli::Args args(argc, argv);\n"
                                                   "  if (args.flag(\"--plain\")) train_plain();\n}\n"));
    auto found = p.lint({"train.cpp"}, {p.include()});
    // The clean function keeps its finding; the note is at the include of the missing header.
    CHECK(codes(found) == "SL002@train.cpp:2:10 SL501@train.cpp:8:21 ");
    const auto* note = firstOf(found, "SL002");
    REQUIRE(note);
    CHECK(note->severity == shardlint::Severity::Info);
    CHECK(note->message.find("header `nowhere/cli.h` was not found with the compile flags from the command line") !=
          std::string::npos);
    CHECK(note->message.find("2 later Clang error(s) may come from it and are not reported as SL001") !=
          std::string::npos);
    CHECK(note->message.find("withheld") == std::string::npos);
    CHECK(firstOf(found, "SL001") == nullptr);
  }
  SECTION("the same bug in a function that uses the missing header's names is withheld, and so are its callers'") {
    p.write("train.cpp", withMissing(kTwoIncludes,
                                     "void train_args(int argc, char** argv) {\n"
                                     "  cli::Args args(argc, argv);\n"
                                     "  Net net;\n"
                                     "  torch::optim::SGD opt(net.parameters(), 0.1);\n"
                                     "  net.grow();\n"
                                     "  opt.step();\n"
                                     "}\n"
                                     "void grow_it(Net& n) { n.grow(); cli::log(\"grown\"); }\n"
                                     "void train_helper() {\n"
                                     "  Net net;\n"
                                     "  torch::optim::SGD opt(net.parameters(), 0.1);\n"
                                     "  grow_it(net);\n"
                                     "  opt.step();\n"
                                     "}\n"
                                     "int main(int argc, char** argv) { train_plain(); train_args(argc, argv); }\n"));
    auto found = p.lint({"train.cpp"}, {p.include()});
    CHECK(codes(found) == "SL002@train.cpp:2:10 SL501@train.cpp:8:21 ");
    const auto* note = firstOf(found, "SL002");
    REQUIRE(note);
    CHECK(note->message.find("2 finding(s) on code Clang could not parse without it withheld") != std::string::npos);
  }
  SECTION("an error outside any function (a member of an unknown type) withholds all of the unit's findings") {
    p.write("train.cpp", withMissing(kTwoIncludes, "struct Settings { cli::Args args; };\n"));
    auto found = p.lint({"train.cpp"}, {p.include()});
    CHECK(codes(found) == "SL002@train.cpp:2:10 ");
    CHECK(found[0].message.find("1 finding(s) on code Clang could not parse without it withheld") != std::string::npos);
  }
  SECTION("Clang goes on after it: the headers included later are read, the code is analysed") {
    // The missing header comes first: as a fatal error it stopped Clang from reading mini.h.
    p.write("train.cpp", withMissing("#include <nowhere/cli.h>\n#include <torch/mini.h>\n", ""));
    CHECK(codes(p.lint({"train.cpp"}, {p.include()})) == "SL002@train.cpp:1:10 SL501@train.cpp:8:21 ");
  }
  SECTION("a missing header reached through a project header: the note is on the unit's include of it") {
    p.write("net.h", "#pragma once\n#include <nowhere/cli.h>\n#include <torch/mini.h>\n");
    p.write("train.cpp", withMissing("#include \"net.h\"\n\n", ""));
    auto found = p.lint({"train.cpp"}, {p.include()});
    CHECK(codes(found) == "SL002@train.cpp:1:10 SL501@train.cpp:8:21 ");
    const auto* note = firstOf(found, "SL002");
    REQUIRE(note);
    CHECK(note->message.find("header `nowhere/cli.h` (included from ") != std::string::npos);
    CHECK(note->message.find("net.h:2)") != std::string::npos);
  }
  SECTION("each missing header once, in the order Clang met them") {
    p.write("train.cpp", withMissing("#include <torch/mini.h>\n#include <nowhere/a.h>\n", "#include \"nowhere_b.h\"\n"
                                                                                          "#include <nowhere/a.h>\n"));
    auto found = p.lint({"train.cpp"}, {p.include()});
    CHECK(codes(found) == "SL002@train.cpp:2:10 SL501@train.cpp:8:21 SL002@train.cpp:12:10 ");
    CHECK(found[0].message.find("`nowhere/a.h`") != std::string::npos);
    CHECK(found[2].message.find("`nowhere_b.h`") != std::string::npos);
  }
  SECTION("a real error before the missing header is still SL001; those after it may be its consequences") {
    p.write("before.cpp", withMissing("#include <torch/mini.h>\nint broken = ;\n#include <nowhere/cli.h>\n", ""));
    p.write("after.cpp", withMissing(kTwoIncludes, "int broken = ;\n"));
    auto found = p.lint({"after.cpp", "before.cpp"}, {p.include()});
    // (after.cpp: the error is outside any function, so its finding is withheld too.)
    CHECK(codes(found) == "SL002@after.cpp:2:10 SL001@before.cpp:2:14 SL002@before.cpp:3:10 SL501@before.cpp:9:21 ");
    CHECK(found[0].message.find("1 later Clang error(s)") != std::string::npos);
    CHECK(found[1].message.find("expected expression") != std::string::npos);
    CHECK(found[2].message.find("later Clang error") == std::string::npos);  // none after it
  }
}

TEST_CASE("cxx: a missing header with thousands of errors after it does not crash and withholds the findings",
          "[cxx][hostile]") {
  if (!shardlint::cxx::available()) return;
  Project p;
  std::string body = "void noisy() {\n";
  for (int i = 0; i < 12000; ++i) body += "  cli::call(" + std::to_string(i) + ");\n";
  body += "}\n";
  std::string many;
  for (int i = 0; i < 140; ++i) many += "#include <nowhere/h" + std::to_string(i) + ".h>\n";
  p.write("train.cpp", withMissing(kTwoIncludes, body + many + "#include <>\n#include \"\"\n#include <nowhere/\n"));
  auto found = p.lint({"train.cpp"}, {p.include()});
  // Past kMaxErrorSites the errors are not located any more: nothing is certain, all is withheld.
  REQUIRE(!found.empty());
  CHECK(firstOf(found, "SL501") == nullptr);
  size_t notes = 0;
  for (const auto& d : found) notes += d.code == "SL002";
  CHECK(notes == shardlint::cxx::kMaxMissingHeaders);  // the first 100 headers; the first note counts the others
  CHECK(found[0].message.find("41 more header(s) not found are not listed") != std::string::npos);
  CHECK(found[0].message.find("withheld") != std::string::npos);
}

TEST_CASE("cxx: the memory gate runs a job alone until its kind is measured, then packs by the budget",
          "[cxx][gate]") {
  using shardlint::ClangGate;
  const size_t MiB = size_t{1} << 20;
  ClangGate gate(256 * MiB);
  ClangGate::Ticket a, b, c;
  // Nothing measured: each job runs alone.
  REQUIRE(gate.tryEnter("torch", a));
  CHECK(!gate.tryEnter("torch", b));
  CHECK(!gate.tryEnter("mini", b));
  gate.leave(a, 220 * MiB);
  CHECK(gate.estimate("torch") == 220 * MiB);
  CHECK(gate.estimate("mini") == 256 * MiB);
  // A measured LibTorch unit: two do not fit, one does.
  REQUIRE(gate.tryEnter("torch", a));
  CHECK(!gate.tryEnter("torch", b));
  gate.leave(a, 220 * MiB);
  // Small units run together once measured; never below a floor of 1 MiB each.
  REQUIRE(gate.tryEnter("mini", a));
  gate.leave(a, 1000);
  CHECK(gate.estimate("mini") == MiB);
  REQUIRE(gate.tryEnter("mini", a));
  REQUIRE(gate.tryEnter("mini", b));
  REQUIRE(gate.tryEnter("torch", c));  // 1 + 1 + 220 MiB fit
  ClangGate::Ticket d;
  CHECK(!gate.tryEnter("torch", d));  // a second LibTorch unit does not
  gate.leave(a, MiB);
  gate.leave(b, MiB);
  gate.leave(c, 230 * MiB);
  CHECK(gate.estimate("torch") == 230 * MiB);  // the last measure
  CHECK(gate.mostAtOnce() == 3);
  // A failed job (0) leaves the estimate as it was; leaving twice is harmless.
  REQUIRE(gate.tryEnter("torch", a));
  gate.leave(a, 0);
  gate.leave(a, 0);
  CHECK(gate.estimate("torch") == 230 * MiB);
  // enter() waits for the running job: a second thread gets in only after leave().
  REQUIRE(gate.tryEnter("torch", a));
  std::atomic<bool> in{false};
  std::thread other([&] {
    ClangGate::Ticket t = gate.enter("torch");
    in = true;
    gate.leave(t, 230 * MiB);
  });
  CHECK(!in);  // cannot be in: the budget holds one
  gate.leave(a, 230 * MiB);
  other.join();
  CHECK(in);
}

TEST_CASE("cxx: --stats prints each unit's time and memory", "[cxx][cli]") {
  if (!shardlint::cxx::available()) return;
  Project p;
  p.write("a.cpp", kBuggy);
  p.write("b.cpp", std::string("#include <nowhere/cli.h>\n") + kBuggy);
  std::string cd = "cd " + shellQuote(p.path().string()) + " && " + shellQuote(SHARDLINT_BINARY);
  auto r = runShell(cd + " check -q --no-cache --stats -j2 a.cpp b.cpp -- " + shellQuote(p.include()) + " 2>&1");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(r.out.find("C++ units       2 parsed with Clang (of 2;") != std::string::npos);
  CHECK(r.out.find("at most ") != std::string::npos);
  CHECK(r.out.find("MiB  a.cpp\n") != std::string::npos);
  CHECK(r.out.find("MiB  b.cpp (1 header(s) not found)\n") != std::string::npos);
  CHECK(r.out.find("(budget 256 MiB of Clang's allocations)") != std::string::npos);
  auto wider = runShell(cd + " check -q --no-cache --stats --cxx-memory 1024 a.cpp -- " + shellQuote(p.include()) + " 2>&1");
  CHECK(wider.out.find("(budget 1024 MiB of Clang's allocations)") != std::string::npos);
  CHECK(runShell(cd + " check -q --no-cache --cxx-memory 0 a.cpp 2>&1").code == 2);
}

// Clang runs in the unit's own folder: a relative --cache-dir named another place there, so the
// precompiled header was built but never found (and then discarded as refused).
TEST_CASE("cxx: a relative --cache-dir still gives the units their precompiled header", "[cxx][pch]") {
  if (!shardlint::cxx::available()) return;
  PchProject p;
  p.write("src/a.cpp", kBuggy);
  p.write("src/b.cpp", std::string("// the same headers, another unit\n") + kBuggy);
  std::string cmd = "cd " + shellQuote(p.path().string()) + " && " + shellQuote(SHARDLINT_BINARY) +
                    " check -q --stats --cache-dir rel-cache src/a.cpp src/b.cpp -- " + shellQuote(p.libraryInclude()) +
                    " 2>&1";
  auto first = runShell(cmd);
  INFO(first.out);
  CHECK(first.out.find("C++ headers     2 unit(s) with a precompiled header; 1 built") != std::string::npos);
  auto second = runShell(cmd);
  INFO(second.out);
  CHECK(second.out.find("C++ headers     2 unit(s) with a precompiled header; 0 built") != std::string::npos);
  CHECK(fs::exists(p.path() / "rel-cache" / "cxx-pch"));
}
