#include "cxx/CxxModel.h"

namespace shardlint::cxx {

bool Path::within(const Path& base) const {
  if (!known() || root != base.root || var != base.var || members.size() < base.members.size()) return false;
  for (size_t i = 0; i < base.members.size(); ++i)
    if (members[i] != base.members[i]) return false;
  return true;
}

std::string Path::render() const {
  if (root == Root::This && members.empty()) return "*this";
  std::string out = name.empty() ? std::string("?") : name;
  for (const auto& m : memberNames) out += "->" + m;
  return out;
}

}  // namespace shardlint::cxx
