// Reading a call's arguments as the FSDP call model needs them: constants, sharding strategies, the text
// written for a keyword, the callee as written; and a call's result made of several values.
#include <algorithm>
#include <cctype>

#include "fsdp/FsdpModelImpl.h"

namespace shardlint::rules::fsdp {

using semantic::CallSite;
using semantic::Obj;
using semantic::ObjKind;

std::optional<std::string> literalOf(const Store& st, const ValueSet* vs) {
  // One constant, or several that agree (`cfg.freeze or cfg.use_peft` with both defaults False).
  // An option the engine has no value for (semantic "option_value": an attribute of an
  // `argparse.Namespace(**config)`) joined with an option's default is read as that default, as the
  // command line may change either (`args.x` from `parse_args()` or from a `--config` file).
  if (!vs || vs->empty()) return std::nullopt;
  std::optional<std::string> name;
  bool defaulted = false, fromOptions = false;
  for (ObjId id : *vs) {
    const Obj& o = st.obj(id);
    if (o.kind == ObjKind::Derived && o.hasTag("option_value")) {
      fromOptions = true;
      continue;
    }
    if (o.kind != ObjKind::Literal || (name && *name != o.name)) return std::nullopt;
    name = o.name;
    defaulted = defaulted || o.hasTag("option_default");
  }
  if (fromOptions && !defaulted) return std::nullopt;
  return name;
}

// SL203's fact: an FSDP1 sharding strategy as torch names it (FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD,
// _HYBRID_SHARD_ZERO2), from `ShardingStrategy.X`, a string (accelerate's plugin takes "no_shard" in any case) or
// the enum's number (accelerate: `FSDP_SHARDING_STRATEGY.index(name) + 1`); "?" when it is not one of those.
std::string shardingName(std::string_view written) {
  static const char* const kNames[] = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "_HYBRID_SHARD_ZERO2"};
  if (auto dot = written.rfind('.'); dot != std::string_view::npos) written = written.substr(dot + 1);
  if (written.size() == 1 && written[0] >= '1' && written[0] <= '5') return kNames[written[0] - '1'];
  std::string upper(written);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "HYBRID_SHARD_ZERO2") upper = "_HYBRID_SHARD_ZERO2";
  for (const char* n : kNames)
    if (upper == n) return upper;
  return "?";
}

// The strategy a `sharding_strategy=` argument gives: every value one known strategy (a constant, or
// `ShardingStrategy.X`, which the engine reads as a qualified name or an attribute), else "?".
std::string shardingOf(const Store& st, const ValueSet* vs) {
  if (!vs || vs->empty()) return "?";
  std::string found;
  for (ObjId id : *vs) {
    const Obj& o = st.obj(id);
    std::string name = o.kind == ObjKind::Literal || o.kind == ObjKind::Ref || o.kind == ObjKind::Derived
                           ? shardingName(o.name)
                           : "?";
    if (name == "?" || (!found.empty() && found != name)) return "?";
    found = name;
  }
  return found;
}

bool anyTagged(const Store& st, const ValueSet& vs, std::string_view tag) {
  return std::any_of(vs.begin(), vs.end(), [&](ObjId id) { return st.obj(id).hasTag(tag); });
}

ValueSet flattenModules(const Store& st, const ValueSet& vs) {
  ValueSet out;
  st.flatten(vs, out);
  out.erase(std::remove_if(out.begin(), out.end(), [&](ObjId id) { return st.obj(id).kind == ObjKind::Literal; }),
            out.end());
  return out;
}

ValueSet makeResult(semantic::Interp& in, const std::vector<ValueSet>& values, const semantic::Origin& origin) {
  if (values.size() == 1) return values[0];
  ObjId c = in.newObject(ObjKind::Container, "", origin);
  in.store().obj(c).containerKind = 't';
  in.store().obj(c).setElements(values);
  return {c};
}

std::string calleeText(const CallSite& site) {
  std::string_view src = site.in.file().text;
  std::string_view call = src.substr(site.origin.range.begin, site.origin.range.end - site.origin.range.begin);
  auto paren = call.find('(');
  return std::string(call.substr(0, paren));
}

// The text written for the call's i-th keyword (its value, or the `**dict` it comes from), when it is
// in the call's file; empty otherwise.
std::string_view writtenKeyword(const CallSite& site, size_t i) {
  if (i >= site.kwargs.size() || i >= site.kwargOrigins.size()) return {};
  std::string_view src = site.in.file().text;
  const semantic::Origin& at = site.kwargOrigins[i];
  if (at.file != site.origin.file || at.range.end > src.size() || at.range.begin >= at.range.end) return {};
  return src.substr(at.range.begin, at.range.end - at.range.begin);
}

// The written text of keyword `name` of the call and where it is ("file:begin-end"), when in the call's file.
std::pair<std::string, std::string> keywordText(const CallSite& site, std::string_view name) {
  for (size_t i = 0; i < site.kwargs.size(); ++i) {
    if (site.kwargs[i].first != name) continue;
    std::string_view written = writtenKeyword(site, i);
    if (written.empty()) continue;
    const semantic::Origin& at = site.kwargOrigins[i];
    return {std::string(written),
            std::to_string(at.file) + ":" + std::to_string(at.range.begin) + "-" + std::to_string(at.range.end)};
  }
  return {};
}

}  // namespace shardlint::rules::fsdp
