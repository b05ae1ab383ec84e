// The fuzz targets' entries: plain functions, compiled both into the libFuzzer binaries
// (tests/fuzz/CMakeLists.txt, SHARDLINT_FUZZ=ON, scripts/fuzz.sh) and into the normal test
// binary (tests/test_fuzz_regressions.cpp runs every saved regression input through them).
// Each returns 0; a bug shows as a crash, a sanitizer report or a leak.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace shardlint::fuzz {

// 1. Arbitrary bytes as a Python file, every rule on (lintText, syntaxFindings).
int fuzzPython(const uint8_t* data, size_t size);
// 2. / 3. Arbitrary bytes as a YAML / JSON configuration file (the linter's config path, and
// the YAML model with PyYAML-style scalar resolution on every scalar).
int fuzzYaml(const uint8_t* data, size_t size);
int fuzzJson(const uint8_t* data, size_t size);
// 4. Arbitrary bytes as shardlint's TOML settings (`.shardlint.toml`, or a pyproject.toml when
// the text has a `[tool.` table), mapped to lint options, globs and finding settings.
int fuzzSettings(const uint8_t* data, size_t size);
// 5. Arbitrary bytes as the client's side of an LSP session (framing, JSON-RPC, dispatcher);
// the input is an in-memory file, so the server never waits for more.
int fuzzLsp(const uint8_t* data, size_t size);
// 6. A small project: the input split into files (`### name` header lines), written to a
// temporary folder and linted together (imports between them are followed).
int fuzzProject(const uint8_t* data, size_t size);

struct Target {
  const char* name;  // as in scripts/fuzz.sh and tests/fuzz/regressions/<name>/
  int (*entry)(const uint8_t*, size_t);
};
const std::vector<Target>& targets();

// The project target's split of an input: (relative path, contents), at most 8 files.
std::vector<std::pair<std::string, std::string>> splitProject(const std::string& input);

}  // namespace shardlint::fuzz
