// The project's declared dependencies (driver/Requirements.h) and the version bounds the rules
// read from them (rules/fsdp/Versions.h).
#include <catch2/catch.hpp>

#include "Registry.h"
#include "TestSupport.h"
#include "driver/Linter.h"
#include "driver/Requirements.h"
#include "fsdp/Versions.h"

using namespace shardlint;
using shardlint::rules::fsdp::allowsOnlyAtLeast;
using shardlint::rules::fsdp::allowsOnlyBelow;
using shardlint::rules::fsdp::pinnedAtLeast;
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

TEST_CASE("requirements: a kept index forgets its answers when what they were read from changes on disk",
          "[requirements]") {
  testing::TempDir t("shardlint-req-");
  t.write("repo/.git/HEAD", "ref: refs/heads/main\n");
  t.write("repo/requirements.txt", "-r requirements/base.txt\n");
  t.write("repo/requirements/base.txt", "lightning==2.0.9\n");
  t.write("repo/src/train.py", "");
  RequirementsIndex index;
  auto spec = [&] {
    const Requirements& r = index.forDirectory(t.path() / "repo/src");
    auto it = r.find("lightning");
    return it == r.end() || it->second.empty() ? std::string("none") : it->second[0].spec;
  };
  CHECK(spec() == "==2.0.9");
  index.revalidate();  // nothing changed: the same answer (and no file is read again)
  CHECK(spec() == "==2.0.9");
  // A file named by `-r` rewritten (another size).
  t.write("repo/requirements/base.txt", "lightning>=2.1.0,<3\n");
  CHECK(spec() == "==2.0.9");  // not before revalidate: an answer stays valid while in use
  index.revalidate();
  CHECK(spec() == ">=2.1.0,<3");
  // A dependency file created in the file's own folder: that folder's listing changed.
  t.write("repo/src/requirements.txt", "lightning==1.9\n");
  index.revalidate();
  CHECK(spec() == "==1.9");
  std::filesystem::remove(t.path() / "repo/src/requirements.txt");
  index.revalidate();
  CHECK(spec() == ">=2.1.0,<3");
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
  facts["requires:pytorch-lightning"] = "<2.1\tsetup.cfg:6\n>=2.2\tpyproject.toml:4";
  CHECK_FALSE(pinnedBelow(facts, {"lightning", "pytorch-lightning"}, "2.1"));
  CHECK_FALSE(pinnedBelow({{"requires:lightning", "\trequirements.txt:1"}}, {"lightning"}, "2.1"));
  CHECK_FALSE(pinnedBelow({}, {"lightning"}, "2.1"));
  // Poetry alternatives survive the facts (declarations are joined by newlines, not "|").
  auto poetry = pinnedBelow({{"requires:lightning", "~2.0 || ~1.9\tpyproject.toml:12"}}, {"lightning"}, "2.1");
  REQUIRE(poetry);
  CHECK(*poetry == "lightning~2.0 || ~1.9 (pyproject.toml:12)");
  CHECK_FALSE(pinnedBelow({{"requires:lightning", "~2.0 || ^2.2\tpyproject.toml:12"}}, {"lightning"}, "2.1"));
}

TEST_CASE("requirements: `pip install` lines of shell scripts", "[requirements]") {
  auto r = parseRequirementsFile("install.sh",
                                 "#!/bin/bash\n"                                                      // 1
                                 "# pip install commented==1.0\n"                                     // 2
                                 "conda install pytorch=2.4.0 -c pytorch\n"                           // 3
                                 "pip install flash-attn==2.6.3 --no-build-isolation\n"               // 4
                                 "pip install accelerate==0.33.0\n"                                   // 5
                                 "pip3 install -U 'transformers[torch]>=4.40,<4.52' -r reqs.txt \\\n"  // 6
                                 "    peft==0.12.0 -e . --index-url https://example.invalid/simple\n"  // 7
                                 "python3 -m pip install --no-cache-dir \"datasets == 2.20.0\" && echo ok\n"  // 8
                                 "uv pip install trl>=0.9 2>&1 | tee log\n"                           // 9
                                 "pip install ./local_pkg git+https://example.invalid/x.git dist/a.whl\n"  // 10
                                 "pip install \"deepspeed==${DS_VERSION}\" wandb; pip uninstall -y apex\n"  // 11
                                 "python << EOF\nimport os  # pip install hidden==1.0\nEOF\n"         // 12-14
                                 "pip --quiet install omegaconf==2.3.0\n");                           // 15
  REQUIRE(only(r, "flash-attn"));
  CHECK(only(r, "flash-attn")->spec == "==2.6.3");
  CHECK(only(r, "flash-attn")->line == 4);
  REQUIRE(only(r, "accelerate"));
  CHECK(only(r, "accelerate")->spec == "==0.33.0");
  CHECK(only(r, "accelerate")->line == 5);
  CHECK(only(r, "accelerate")->file == "install.sh");
  REQUIRE(only(r, "transformers"));
  CHECK(only(r, "transformers")->spec == ">=4.40,<4.52");
  CHECK(only(r, "transformers")->line == 6);
  REQUIRE(only(r, "peft"));
  CHECK(only(r, "peft")->line == 7);  // on the continuation line
  REQUIRE(only(r, "datasets"));
  CHECK(only(r, "datasets")->spec == "==2.20.0");
  // Unquoted, `>=0.9` is a redirection: the shell installs the newest trl.
  REQUIRE(only(r, "trl"));
  CHECK(only(r, "trl")->spec.empty());
  REQUIRE(only(r, "deepspeed"));
  CHECK(only(r, "deepspeed")->spec.empty());  // a version from a variable is unknown
  CHECK(only(r, "wandb"));
  REQUIRE(only(r, "omegaconf"));
  CHECK(only(r, "omegaconf")->line == 15);
  for (const char* absent : {"commented", "pytorch", "reqs-txt", "local-pkg", "apex", "hidden", "echo", "ok", "tee",
                             "log", "https", "y"})
    CHECK_FALSE(r.count(absent));
  CHECK(r.size() == 9);
  CHECK(parseRequirementsFile("run.sh", "accelerate launch --config_file c.yaml train.py\n").empty());
  CHECK(parseRequirementsFile("odd.sh", "pip install 'unterminated==1.0\n\\").size() <= 1);  // no crash
  // Shell-like noise (quotes, here-documents, redirections, continuations) ends without a crash.
  std::string noise;
  unsigned x = 12345;
  const std::string alphabet = "pip install =<>&|;()'\"\\\n#$`-a1.<<EOF\nEOF\n";
  for (int i = 0; i < 20000; ++i) {
    x = x * 1103515245u + 12345u;
    noise += alphabet[(x >> 16) % alphabet.size()];
  }
  CHECK_NOTHROW(parseRequirementsFile("noise.sh", noise));
}

TEST_CASE("requirements: shell scripts of the folders on the way declare, but only dependency files stop the walk",
          "[requirements]") {
  testing::TempDir t("shardlint-req-sh-");
  // The HALOs layout: install.sh at the top, the configs in a sub-folder, no other dependency file.
  t.write("halos/.git/HEAD", "ref: refs/heads/main\n");
  t.write("halos/install.sh", "pip install transformers==4.51.3\npip install accelerate==0.33.0\n");
  t.write("halos/accelerate_config/fsdp.yaml", "");
  RequirementsIndex index;
  const Requirements& h = index.forDirectory(t.path() / "halos/accelerate_config");
  REQUIRE(h.count("accelerate"));
  CHECK(h.at("accelerate")[0].spec == "==0.33.0");
  CHECK(h.at("accelerate")[0].line == 2);
  CHECK(h.at("accelerate")[0].file == (t.path() / "halos/install.sh").lexically_normal().generic_string());
  // A launch folder's script that installs an extra package does not hide the requirements above it.
  t.write("repo/.git/HEAD", "ref: refs/heads/main\n");
  t.write("repo/requirements.txt", "accelerate>=1.2\n");
  t.write("repo/setup_env.sh", "pip install accelerate==1.4.0\n");
  t.write("repo/examples/run.sh", "pip install flash-attn\naccelerate launch train.py\n");
  t.write("repo/examples/deep/train.py", "");
  t.write("install.sh", "pip install accelerate==0.20.0\n");  // above the repository: never read
  const Requirements& r = index.forDirectory(t.path() / "repo/examples/deep");
  REQUIRE(r.count("flash-attn"));
  REQUIRE(r.count("accelerate"));
  REQUIRE(r.at("accelerate").size() == 2);
  CHECK(r.at("accelerate")[0].spec == ">=1.2");  // the dependency file first, then the folder's scripts
  CHECK(r.at("accelerate")[1].spec == "==1.4.0");
  CHECK(index.forDirectory(t.path() / "repo/examples").at("flash-attn").size() == 1);  // cached on the way
  // The nearest folder's own scripts come first.
  t.write("repo/tools/install_tools.sh", "pip install accelerate==1.3.0\n");
  const Requirements& tools = index.forDirectory(t.path() / "repo/tools");
  REQUIRE(tools.at("accelerate").size() == 3);
  CHECK(tools.at("accelerate")[0].spec == "==1.3.0");
}

TEST_CASE("versions: which specifiers keep every version at or above a bound", "[requirements]") {
  for (const char* atLeast : {"==0.33.0", "===0.26.0", ">=0.26", ">0.26", "~=0.33.0", "==0.33.*", "=0.33", "^0.33",
                              "~0.33.1", "0.33.0", ">=0.30,<1.0", ">= 0.30 < 1.0", "==0.30.0||==0.33.0", ">=1"})
    CHECK(allowsOnlyAtLeast(atLeast, "0.26"));
  for (const char* open : {"", "<1.0", "<=0.33", "!=0.25", "==0.25.0", ">=0.25", ">0.25.9", "~=0.25.0", "^0.25",
                           "0.25.*", "*", "==0.25.0||==0.33.0", "latest"})
    CHECK_FALSE(allowsOnlyAtLeast(open, "0.26"));
  std::map<std::string, std::string> facts{{"requires:accelerate", "==0.33.0\tinstall.sh:15"}};
  CHECK(pinnedAtLeast(facts, {"accelerate"}, "0.26.0"));
  facts["requires:accelerate"] += "\n<1.0\trequirements.txt:2";
  CHECK_FALSE(pinnedAtLeast(facts, {"accelerate"}, "0.26.0"));
  CHECK_FALSE(pinnedAtLeast({}, {"accelerate"}, "0.26.0"));
}

namespace {
// SL301's findings on `cfg` in a temporary repository whose install.sh installs `pipLine`'s packages.
std::vector<Diagnostic> sl301With(const std::string& pipLine, bool singleFile = false) {
  testing::TempDir t("shardlint-sl301-pin-");
  t.write(".git/HEAD", "ref: refs/heads/main\n");
  if (!pipLine.empty()) t.write("install.sh", "#!/bin/bash\n" + pipLine + "\n");
  std::string cfg =
      "distributed_type: FSDP\nfsdp_config:\n  fsdp_backward_prefetch_policy: BACKWARD_PRE\n"
      "  fsdp_offload_param: true\n";
  auto path = t.write("cfg/fsdp.yaml", cfg);
  LintOptions options;
  options.selection = RuleSelection(rules::catalog(), {"SL301"}, {});
  Linter linter(rules::catalog(), options);
  return singleFile ? linter.lintText(path.string(), cfg) : linter.lintFiles({path.string()});
}
const Diagnostic* at(const std::vector<Diagnostic>& ds, const std::string& key) {
  for (const auto& d : ds)
    if (d.message.rfind("`" + key + "`", 0) == 0) return &d;
  return nullptr;
}
}  // namespace

TEST_CASE("SL301: a renamed key under an accelerate pin that still reads it", "[requirements][SL301]") {
  SECTION("no pin, or a pin that admits 1.0.0: silently ignored, as before") {
    for (const char* line : {"", "pip install accelerate", "pip install 'accelerate>=0.33'", "pip install accelerate==1.0.0"}) {
      INFO(line);
      auto ds = sl301With(line);
      REQUIRE(ds.size() == 2);
      const Diagnostic* d = at(ds, "fsdp_backward_prefetch_policy");
      REQUIRE(d);
      CHECK(d->severity == Severity::Error);
      CHECK(d->message.find("silently ignored (it was renamed)") != std::string::npos);
      REQUIRE(d->fix);
      CHECK(d->fix->applicability == Applicability::Unsafe);
    }
  }
  SECTION("a 0.26-0.34 pin: a deprecation warning with a safe rename") {
    for (bool single : {false, true}) {  // a whole run, and one file (the editor)
      auto ds = sl301With("pip install accelerate==0.33.0", single);
      REQUIRE(ds.size() == 2);
      const Diagnostic* d = at(ds, "fsdp_backward_prefetch_policy");
      REQUIRE(d);
      CHECK(d->severity == Severity::Warning);
      CHECK(d->message.find("deprecated: the project pins accelerate==0.33.0 (../install.sh:2)") != std::string::npos);
      CHECK(d->message.find("accelerate 1.0.0 and later ignore it silently") != std::string::npos);
      REQUIRE(d->fix);
      CHECK(d->fix->applicability == Applicability::Safe);
      REQUIRE(d->fix->edits.size() == 1);
      CHECK(d->fix->edits[0].text == "fsdp_backward_prefetch");
      // A plain typo is not about versions: still an error.
      const Diagnostic* typo = at(ds, "fsdp_offload_param");
      REQUIRE(typo);
      CHECK(typo->severity == Severity::Error);
    }
  }
  SECTION("a range below 1.0.0 that admits releases before 0.26.0: the rename is unsafe") {
    auto ds = sl301With("pip install 'accelerate<1.0'");
    const Diagnostic* d = at(ds, "fsdp_backward_prefetch_policy");
    REQUIRE(d);
    CHECK(d->severity == Severity::Warning);
    CHECK(d->message.find("once the pin excludes accelerate before 0.26.0") != std::string::npos);
    REQUIRE(d->fix);
    CHECK(d->fix->applicability == Applicability::Unsafe);
  }
  SECTION("a pin before 0.26.0: the old name is the only one it reads") {
    auto ds = sl301With("pip install accelerate==0.25.0");
    REQUIRE(ds.size() == 1);
    CHECK(at(ds, "fsdp_offload_param"));
  }
}
