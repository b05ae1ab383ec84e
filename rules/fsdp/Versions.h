// Framework versions a project pins: which default applies when a default changed between
// releases (Lightning's FSDPStrategy `use_orig_params`, False before 2.1, True since), or whether a
// config key is still read (accelerate's launcher read `fsdp_backward_prefetch_policy` before 1.0.0).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardlint::rules::fsdp {

// Whether every version `spec` allows is below `bound` ("2.1"): PEP 440 clauses (`==`, `===`, `<`, `<=`,
// `~=`, `==X.*`; `>=`, `>`, `!=` bound nothing from above), conda's `=X` / `=X.*`, Poetry's `^X`, `~X`
// and a bare `X`, Poetry alternatives joined by `||` (each must be below). An empty spec is unbounded.
bool allowsOnlyBelow(std::string_view spec, std::string_view bound);

// A declaration of one of `packages` in the facts ("requires:NAME", Linter) that makes every version the
// project may install lower than `bound`: "NAME SPEC (PATH:LINE)" of the first declaration, or nullopt
// when some declaration allows `bound` or later (or none is there).
std::optional<std::string> pinnedBelow(const std::map<std::string, std::string>& facts,
                                       const std::vector<std::string>& packages, std::string_view bound);

// Whether every version `spec` allows is at or above `bound` ("0.26"): the lower bounds of the same forms
// (`==`, `===`, `>=`, `>`, `~=`, `==X.*`, conda `=X`, Poetry `^X`, `~X` and a bare `X`; `<`, `<=`, `!=` bound
// nothing from below). An empty spec is unbounded.
bool allowsOnlyAtLeast(std::string_view spec, std::string_view bound);

// Whether the facts declare one of `packages` and every declaration allows only versions at or above `bound`.
bool pinnedAtLeast(const std::map<std::string, std::string>& facts, const std::vector<std::string>& packages,
                   std::string_view bound);

// Which of `releases` (ascending, "0.25.0") the declarations of `packages` in the facts allow: a release is
// left out when some declaration caps every allowed version below it, or keeps every allowed version at or
// above the next release (the next patch after the last release). nullopt when nothing is declared. `pin`
// receives "NAME SPEC (PATH:LINE)" of the first declaration. Clauses that exclude single versions (`!=`)
// exclude nothing here.
std::optional<std::vector<bool>> allowedReleases(const std::map<std::string, std::string>& facts,
                                                 const std::vector<std::string>& packages,
                                                 const std::vector<std::string_view>& releases, std::string* pin);

}  // namespace shardlint::rules::fsdp
