// The environment across branches (Interp, semantic/Interpreter.h): setVar's undo log, each arm's
// changes (beginArm / endArm) and where arms meet (merged, apply).
#include "semantic/Interpreter.h"

#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace shardlint::semantic {

// ---------------------------------------------------------------- the environment across branches

namespace {
// Binds `key` (at `it`, its entry or end()) to `value`, or unbinds it when there is none.
void put(EnvMap& env, EnvMap::iterator it, const std::string& key, std::optional<ValueSet> value) {
  if (!value) {
    if (it != env.end()) env.erase(it);
  } else if (it != env.end()) {
    it->second = std::move(*value);
  } else {
    env.emplace(key, std::move(*value));
  }
}
}  // namespace

void Interp::setVar(const std::string& key, std::optional<ValueSet> value) {
  EnvMap& env = envOf(key);
  auto it = env.find(key);
  auto current = [&] { return it == env.end() ? std::nullopt : std::optional<ValueSet>(it->second); };
  if (!logs_.empty() && logs_.back().keys.insert(key).second) logs_.back().before.emplace_back(key, current());
  if (trackAttrWrites_ && &env == &frame_.attrs && !attrsBefore_.count(key)) attrsBefore_.emplace(key, current());
  put(env, it, key, std::move(value));
}

// The attribute stores a call interpreted in place changed (callFunction), written again through setVar
// so that this frame's open arms log them: each one's value from before the call is put back first. A
// store the call unbound (an unreachable end, clearEnv) keeps its value from before the call; one it
// left as it was is neither written again nor logged.
void Interp::writeBackAttrs(std::unordered_map<std::string, std::optional<ValueSet>>& before) {
  for (auto& [key, old] : before) {
    auto it = frame_.attrs.find(key);
    std::optional<ValueSet> now;
    if (it != frame_.attrs.end()) now = std::move(it->second);
    bool changed = now && now != old;
    put(frame_.attrs, it, key, std::move(old));
    if (changed) setVar(key, std::move(now));
  }
}

void Interp::beginArm() { logs_.emplace_back(); }

Interp::Changes Interp::endArm() {
  EnvLog log = std::move(logs_.back());
  logs_.pop_back();
  Changes changes;
  for (auto& [key, old] : log.before) {
    EnvMap& env = envOf(key);
    auto it = env.find(key);
    std::optional<ValueSet> now = it == env.end() ? std::nullopt : std::optional<ValueSet>(it->second);
    if (now == old) continue;
    changes.emplace_back(key, std::move(now));
    put(env, it, key, std::move(old));  // undone: the outer arm's log never saw this write
  }
  return changes;
}

Interp::Changes Interp::merged(const std::vector<Changes>& arms) const {
  std::unordered_map<std::string, std::vector<const std::optional<ValueSet>*>> byKey;
  std::vector<const std::string*> order;  // first-change order, for a deterministic result
  for (size_t a = 0; a < arms.size(); ++a)
    for (const auto& [key, value] : arms[a]) {
      auto [it, inserted] = byKey.try_emplace(key, arms.size(), nullptr);
      if (inserted) order.push_back(&it->first);
      it->second[a] = &value;
    }
  Changes out;
  for (const std::string* key : order) {
    const auto& values = byKey.find(*key)->second;
    const EnvMap& env = envOf(*key);
    auto cur = env.find(*key);
    std::optional<ValueSet> joined;
    for (const std::optional<ValueSet>* v : values) {
      const ValueSet* vs = v ? (*v ? &**v : nullptr) : (cur == env.end() ? nullptr : &cur->second);
      if (!vs) continue;
      if (!joined) joined.emplace();
      addValues(*joined, *vs);
    }
    out.emplace_back(*key, std::move(joined));
  }
  return out;
}

void Interp::apply(const Changes& changes) {
  for (const auto& [key, value] : changes) setVar(key, value);
}

void Interp::clearEnv() {
  std::vector<std::string> keys;
  for (const auto& [key, value] : frame_.env) keys.push_back(key);
  for (const auto& [key, value] : frame_.attrs) keys.push_back(key);
  for (const auto& key : keys) setVar(key, std::nullopt);
}

}  // namespace shardlint::semantic
