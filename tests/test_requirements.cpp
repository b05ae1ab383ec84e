// The project's declared dependencies (driver/Requirements.h) and the version bounds the rules
// read from them (rules/fsdp/Versions.h).
#include <catch2/catch.hpp>

#include "TestSupport.h"
#include "driver/Requirements.h"
#include "fsdp/Versions.h"

using namespace shardlint;
using shardlint::rules::fsdp::allowsOnlyBelow;
using shardlint::rules::fsdp::pinnedBelow;

namespace {
const Requirement* only(const Requirements& r, const std::string& name) {
  auto it = r.find(name);
  return it == r.end() || it->second.size() != 1 ? nullptr : &it->second[0];
}
}  // namespace

TEST_CASE("requirements: package names are normalised (PEP 503)", "[requirements]") {
  CHECK(normalizePackageName("PyTorch_Lightning") == "pytorch-lightning");
  CHECK(normalizePackageName("lightning.fabric") == "lightning-fabric");
  CHECK(normalizePackageName("a__-b") == "a-b");
}

TEST_CASE("requirements: requirements.txt lines, extras, markers, comments, options", "[requirements]") {
  auto r = parseRequirementsFile("requirements.txt",
                                 "# comment\n"
                                 "torch >= 2.0 ; python_version >= '3.9'\n"
                                 "lightning[extra]==2.0.9  # pinned\n"
                                 "--index-url https://example.invalid/simple\n"
                                 "-e .\n"
                                 "numpy\n"
                                 "mypkg @ https://example.invalid/mypkg.tar.gz\n"
                                 "Accelerate (>=0.33, <1.0)\n");
  REQUIRE(only(r, "torch"));
  CHECK(only(r, "torch")->spec == ">=2.0");
  CHECK(only(r, "torch")->line == 2);
  REQUIRE(only(r, "lightning"));
  CHECK(only(r, "lightning")->spec == "==2.0.9");
  CHECK(only(r, "lightning")->line == 3);
  REQUIRE(only(r, "numpy"));
  CHECK(only(r, "numpy")->spec.empty());
  REQUIRE(only(r, "mypkg"));
  CHECK(only(r, "mypkg")->spec.empty());  // a direct reference has no version to read
  REQUIRE(only(r, "accelerate"));
  CHECK(only(r, "accelerate")->spec == ">=0.33,<1.0");
  CHECK(r.size() == 5);
}

TEST_CASE("requirements: pyproject.toml ([project], extras, Poetry) and malformed files", "[requirements]") {
  auto r = parseRequirementsFile("pyproject.toml",
                                 "[project]\nname = \"x\"\ndependencies = [\n  \"torch>=2.1\",\n  \"lightning==2.0.*\",\n]\n"
                                 "[project.optional-dependencies]\ndev = [\"pytest\"]\n"
                                 "[tool.poetry.dependencies]\npython = \"^3.10\"\npytorch-lightning = { version = \"~2.0.4\" }\n"
                                 "wandb = \"*\"\n");
  REQUIRE(only(r, "lightning"));
  CHECK(only(r, "lightning")->spec == "==2.0.*");
  CHECK(only(r, "lightning")->line == 5);
  REQUIRE(only(r, "pytest"));
  REQUIRE(only(r, "pytorch-lightning"));
  CHECK(only(r, "pytorch-lightning")->spec == "~2.0.4");
  CHECK(only(r, "pytorch-lightning")->line == 11);
  REQUIRE(only(r, "wandb"));
  CHECK(only(r, "wandb")->spec.empty());
  CHECK_FALSE(r.count("python"));
  CHECK(parseRequirementsFile("pyproject.toml", "[project\ndependencies = [\"lightning==1.0\"").empty());
  CHECK(parseRequirementsFile("environment.yml", "dependencies: [unclosed").empty());
  CHECK(parseRequirementsFile("setup.cfg", "\x01\x02[[[").empty());
}

TEST_CASE("requirements: setup.cfg and conda environment.yml", "[requirements]") {
  auto cfg = parseRequirementsFile("setup.cfg",
                                   "[metadata]\nname = x\n[options]\ninstall_requires =\n    torch>=2.0\n"
                                   "    lightning<2.1\nzip_safe = False\n[options.extras_require]\ntest =\n    pytest\n");
  REQUIRE(only(cfg, "lightning"));
  CHECK(only(cfg, "lightning")->spec == "<2.1");
  CHECK(only(cfg, "lightning")->line == 6);
  CHECK(only(cfg, "pytest"));
  CHECK_FALSE(cfg.count("zip-safe"));
  auto env = parseRequirementsFile("environment.yml",
                                   "name: t\ndependencies:\n  - python=3.10\n  - conda-forge::lightning=2.0\n"
                                   "  - pytorch 2.0.1\n  - pip:\n      - accelerate==0.33.0\n");
  REQUIRE(only(env, "lightning"));
  CHECK(only(env, "lightning")->spec == "=2.0");
  CHECK(only(env, "lightning")->line == 4);
  REQUIRE(only(env, "pytorch"));
  CHECK(only(env, "pytorch")->spec == "=2.0.1");
  REQUIRE(only(env, "accelerate"));
  CHECK(only(env, "accelerate")->spec == "==0.33.0");
}

TEST_CASE("requirements: the nearest folder with dependency files, stopping at the repository", "[requirements]") {
  testing::TempDir t("shardlint-req-");
  t.write("repo/.git/HEAD", "ref: refs/heads/main\n");
  t.write("repo/requirements.txt", "-r requirements/base.txt\nwandb\n");
  t.write("repo/requirements/base.txt", "lightning==2.0.9\n-r ../requirements.txt\n");  // a cycle ends
  t.write("repo/src/pkg/train.py", "");
  t.write("repo/sub/pyproject.toml", "[project]\ndependencies = [\"lightning>=2.2\"]\n");
  t.write("requirements.txt", "lightning==1.0\n");  // above the repository: never read
  RequirementsIndex index;
  const Requirements& r = index.forDirectory(t.path() / "repo/src/pkg");
  REQUIRE(r.count("lightning"));
  CHECK(r.at("lightning")[0].spec == "==2.0.9");
  CHECK(r.count("wandb"));
  const Requirements& sub = index.forDirectory(t.path() / "repo/sub");
  REQUIRE(sub.count("lightning"));
  CHECK(sub.at("lightning").size() == 1);
  CHECK(sub.at("lightning")[0].spec == ">=2.2");
  CHECK(index.forDirectory(t.path() / "repo/src/pkg").count("lightning"));  // cached, same answer
}

TEST_CASE("versions: which specifiers keep every version below a bound", "[requirements]") {
  for (const char* below : {"==2.0.9", "===2.0.0", "<2.1", "<=2.0.9", "<2.1.0", "~=2.0.5", "~=1.9", "==2.0.*", "=2.0",
                            "=2.0.*", "^1.9", "^0.5", "~2.0.4", "~2.0", "2.0.9", "2.0.*", ">=1.8,<2.1",
                            ">= 1.8 < 2.1", "==1.9.0||==2.0.1", "<2", "==2.0.9rc1"})
    CHECK(allowsOnlyBelow(below, "2.1"));
  for (const char* open : {"", ">=2.0", ">2.0.9", "!=2.0", "~=2.0", "^2.0", "~2", "==2.1", "<=2.1", "<2.2", "==2.*",
                           "=2", ">=2.0,!=2.0.1", "==2.0.1||>=2.2", "2.1.0", "*", "latest", "== 2.1"})
    CHECK_FALSE(allowsOnlyBelow(open, "2.1"));
}

TEST_CASE("versions: a pin counts only when every declaration is below", "[requirements]") {
  std::map<std::string, std::string> facts{{"requires:lightning", "==2.0.9\trequirements.txt:3"}};
  auto pin = pinnedBelow(facts, {"lightning", "pytorch-lightning"}, "2.1");
  REQUIRE(pin);
  CHECK(*pin == "lightning==2.0.9 (requirements.txt:3)");
  facts["requires:pytorch-lightning"] = "<2.1\tsetup.cfg:6|>=2.2\tpyproject.toml:4";
  CHECK_FALSE(pinnedBelow(facts, {"lightning", "pytorch-lightning"}, "2.1"));
  CHECK_FALSE(pinnedBelow({{"requires:lightning", "\trequirements.txt:1"}}, {"lightning"}, "2.1"));
  CHECK_FALSE(pinnedBelow({}, {"lightning"}, "2.1"));
}
