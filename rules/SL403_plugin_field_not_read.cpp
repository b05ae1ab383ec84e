// SL403 plugin-field-not-read: an attribute set on, or a keyword passed to, accelerate's
// FullyShardedDataParallelPlugin that the plugin does not have in the accelerate the project pins.
#include <map>
#include <set>

#include "Registry.h"
#include "config/Roles.h"
#include "fsdp/FsdpModel.h"
#include "fsdp/PluginFields.h"

namespace shardlint::rules {
namespace {

using namespace fsdp;
using semantic::Obj;
using semantic::ObjKind;

// Names written for the plugin that other consumers use (the Trainer's fsdp_config, the config
// file's keys): what the plugin calls them.
struct Alias {
  std::string_view written;
  std::string_view field;
};
constexpr Alias kAliases[] = {
    {"transformer_layer_cls_to_wrap", "transformer_cls_names_to_wrap"},
    {"fsdp_transformer_layer_cls_to_wrap", "transformer_cls_names_to_wrap"},
    {"offload_params", "cpu_offload"},
    {"fsdp_offload_params", "cpu_offload"},
    {"backward_prefetch_policy", "backward_prefetch"},
    {"fsdp_backward_prefetch_policy", "backward_prefetch"},
};

bool isAcceleratorState(std::string_view q) {
  return q == "accelerate.state.AcceleratorState" || q == "accelerate.AcceleratorState";
}

class PluginFieldNotRead final : public Rule {
 public:
  explicit PluginFieldNotRead(const RuleInfo* info) : info_(info) {}
  const RuleInfo& info() const override { return *info_; }
  std::vector<std::vector<std::string_view>> prescanTokens() const override {
    return {{"fsdp_plugin", "FullyShardedDataParallelPlugin"}};
  }

  void finish(RuleContext& cx) override {
    std::set<std::pair<uint32_t, uint32_t>> seen;  // (file, byte) of what was reported
    uint32_t self = cx.analysis().module().fileId();
    // Each assignment once, from the root that reaches it through the fewest calls (the function that
    // builds the Accelerator rather than the module code that calls that function).
    struct Found {
      semantic::Event event;
      PluginReleases releases;
      semantic::Origin context;  // where the plugin's holder was made
    };
    std::map<std::pair<uint32_t, uint32_t>, Found> assignments;
    for (const auto& root : cx.analysis().roots()) {
      const semantic::Store& st = *root.store;
      for (const auto& e : st.events) {
        if (e.kind != semantic::EventKind::SetAttr || e.name.empty() || e.name[0] == '[') continue;
        if (e.name.rfind("__", 0) == 0) continue;
        const Obj* holder = evidence(st, e.target);  // before where the code runs: most assignments have none
        if (!holder || neverRuns(st, e.point) || expectedToFail(st, e.point)) continue;
        std::pair<uint32_t, uint32_t> key{e.origin.file, e.origin.range.begin};
        auto it = assignments.find(key);
        if (it == assignments.end() || e.origin.via.size() < it->second.event.origin.via.size())
          assignments.insert_or_assign(key, Found{e, releasesFor(*holder), holder->origin});
      }
      for (const auto& o : st.objects) {
        // Keywords of a plugin built in this file (a helper's plugin is checked in the helper's file).
        if (!o.hasTag("fsdp_plugin") || o.origin.file != self || !o.origin.via.empty()) continue;
        if (neverRuns(st, o.point) || expectedToFail(st, o.point)) continue;
        checkKeywords(cx, o, seen);
      }
    }
    for (const auto& [key, found] : assignments) checkAttribute(cx, found.event, found.releases, found.context, seen);
  }

 private:
  // The object that makes `t` accelerate's plugin (the plugin, or the Accelerator / AcceleratorState
  // whose `.state.fsdp_plugin` it is), or null: without that evidence an `fsdp_plugin` is anybody's.
  static const Obj* evidence(const semantic::Store& st, semantic::ObjId t) {
    const Obj& o = st.obj(t);
    if (o.hasTag("fsdp_plugin")) return &o;
    if (o.kind != ObjKind::Derived || o.name != ".fsdp_plugin" || o.parent == semantic::kNoObj) return nullptr;
    const Obj& p = st.obj(o.parent);
    if (p.kind == ObjKind::Instance && isAcceleratorState(p.name)) return &p;
    if (p.kind != ObjKind::Derived || p.name != ".state" || p.parent == semantic::kNoObj) return nullptr;
    const Obj& a = st.obj(p.parent);
    if (a.hasTag("accelerator") || (a.kind == ObjKind::Instance && isAcceleratorState(a.name))) return &a;
    return nullptr;
  }

  static PluginReleases releasesFor(const Obj& holder) {
    std::map<std::string, std::string> facts;
    if (holder.hasTag("requires_accelerate")) facts["requires:accelerate"] = std::string(holder.tag("requires_accelerate"));
    return judgedReleases(facts);
  }

  // The field `name` was probably meant as, in the judged releases: a known alias, the name without
  // `fsdp_`, or the unique nearest field. Empty when none is close.
  static std::string suggestion(const PluginReleases& r, std::string_view name) {
    for (const auto& a : kAliases)
      if (a.written == name && pluginHas(r, a.field, true)) return std::string(a.field);
    std::string_view bare = config::bareKey(name);
    if (bare != name && pluginHas(r, bare, true)) return std::string(bare);
    size_t best = 99, atBest = 0;
    std::string out;
    for (const auto& p : pluginNames()) {
      if (!pluginHas(r, p.name, true)) continue;
      size_t d = config::editDistance(name, p.name);
      if (d < best) best = d, atBest = 0, out = std::string(p.name);
      atBest += d == best;
    }
    if (atBest != 1 || best > std::max<size_t>(2, name.size() / 4)) return "";
    return out;
  }

  // "in accelerate 0.8.0-1.15.0" / "in accelerate 0.25.0, which the project pins (accelerate==0.25.0 (...))",
  // plus the releases that do have the name, when some do.
  static std::string whereMissing(const PluginReleases& r, std::string_view name, bool fieldsOnly) {
    std::string out = r.pin.empty() ? " in accelerate " + r.describe() + " (every release read)"
                                    : " in the accelerate the project pins (" + r.pin + ": " + r.describe() + ")";
    const PluginName* p = findPluginName(name);
    if (p && (!fieldsOnly || p->kind == "field")) {
      out += "; only accelerate ";
      for (char c : p->releasesText) {
        out += c;
        if (c == ',') out += ' ';
      }
      out += " has it";
    }
    return out;
  }

  void checkAttribute(RuleContext& cx, const semantic::Event& e, const PluginReleases& r,
                      const semantic::Origin& context, std::set<std::pair<uint32_t, uint32_t>>& seen) {
    if (pluginHas(r, e.name, false)) return;
    // The attribute's name: the end of the target expression (`accelerator.state.fsdp_plugin.NAME`), or
    // the string of `setattr(plugin, "NAME", value)` without its quotes.
    semantic::Site site = e.origin.site();
    const std::string& text = cx.file(site.file).text;
    if (site.range.end <= text.size() && site.range.end >= site.range.begin + 2 &&
        (text[site.range.end - 1] == '"' || text[site.range.end - 1] == '\'') &&
        text[site.range.begin] == text[site.range.end - 1])
      site.range.end -= 1;
    if (site.range.end < e.name.size() || site.range.end > text.size() ||
        text.compare(site.range.end - e.name.size(), e.name.size(), e.name) != 0)
      return;
    site.range.begin = site.range.end - static_cast<uint32_t>(e.name.size());
    // In a helper: the call of the helper in the code that made the plugin (or its Accelerator).
    semantic::Site primary = e.origin.primaryIn(context);
    if (primary == e.origin.site()) primary = site;
    if (!seen.insert({primary.file, primary.range.begin}).second) return;
    std::string to = suggestion(r, e.name);
    std::string msg = "`" + e.name + "` is not an attribute of accelerate's `FullyShardedDataParallelPlugin`" +
                      whereMissing(r, e.name, false) +
                      ": the assignment adds a new attribute that accelerate never reads, so the setting is silently "
                      "dropped";
    if (!to.empty()) msg += "; the field is `" + to + "`";
    std::vector<Note> notes;
    if (primary != site) notes.push_back(cx.note(site, "the attribute is set here"));
    std::optional<Fix> fix;
    // Unsafe: the setting then takes effect (the wrap policy, offload... change), which the user should
    // review, and the value may need another form (a list of class names, not one name).
    if (!to.empty() && primary == site)
      fix = Fix{"Rename `" + e.name + "` to `" + to + "`", Applicability::Unsafe, {cx.edit(site, to)}};
    cx.report(info(), primary, std::move(msg), std::move(notes), std::move(fix));
  }

  void checkKeywords(RuleContext& cx, const Obj& plugin, std::set<std::pair<uint32_t, uint32_t>>& seen) {
    TSNode call = ts_node_descendant_for_byte_range(cx.root(), plugin.origin.range.begin, plugin.origin.range.end);
    while (!ts_node_is_null(call) && (syntax::PyKinds::instance().kind(call) != syntax::Kind::call ||
                                      ts_node_start_byte(call) != plugin.origin.range.begin ||
                                      ts_node_end_byte(call) != plugin.origin.range.end))
      call = ts_node_parent(call);
    if (ts_node_is_null(call)) return;
    std::string_view src = cx.file().text;
    PluginReleases r = releasesFor(plugin);
    checkSplatKeywords(cx, plugin, r, seen);
    auto kws = syntax::keywordArguments(call);
    for (const auto& kw : kws) {
      std::string name(syntax::textOf(kw.name, src));
      if (pluginHas(r, name, true)) continue;
      semantic::Site site{plugin.origin.file, syntax::rangeOf(kw.name)};
      if (!seen.insert({site.file, site.range.begin}).second) continue;
      std::string to = suggestion(r, name);
      std::string msg = "`FullyShardedDataParallelPlugin` has no field `" + name + "`" + whereMissing(r, name, true) +
                        ": the call raises `TypeError: __init__() got an unexpected keyword argument '" + name + "'`";
      if (!to.empty()) msg += "; the field is `" + to + "`";
      bool taken = false;
      for (const auto& other : kws) taken = taken || syntax::textOf(other.name, src) == to;
      std::optional<Fix> fix;
      // Unsafe: the setting then takes effect, and the value may need another form.
      if (!to.empty() && !taken)
        fix = Fix{"Rename `" + name + "` to `" + to + "`", Applicability::Unsafe, {cx.edit(site, to)}};
      cx.report(info(), site, std::move(msg), {}, std::move(fix));
    }
  }

  // Keywords from a `**dict` whose keys are constants (`FullyShardedDataParallelPlugin(**kwargs)` with
  // `kwargs = {"fsdp_offload_params": True}`): reported at the splat, naming the key; no fix (the key is
  // written where the dict is built).
  void checkSplatKeywords(RuleContext& cx, const Obj& plugin, const PluginReleases& r,
                          std::set<std::pair<uint32_t, uint32_t>>& seen) {
    std::string_view tag = plugin.tag("plugin_splat_kwargs");
    while (!tag.empty()) {
      size_t semi = tag.find(';');
      std::string_view item = tag.substr(0, semi);
      tag = semi == std::string_view::npos ? std::string_view{} : tag.substr(semi + 1);
      size_t at = item.rfind('@'), dash = item.rfind('-');
      if (at == std::string_view::npos || dash == std::string_view::npos || dash < at) continue;
      std::string name(item.substr(0, at));
      if (pluginHas(r, name, true)) continue;
      semantic::Site site{plugin.origin.file,
                          {static_cast<uint32_t>(std::stoul(std::string(item.substr(at + 1, dash - at - 1)))),
                           static_cast<uint32_t>(std::stoul(std::string(item.substr(dash + 1))))}};
      if (!seen.insert({site.file, site.range.begin}).second) continue;
      std::string to = suggestion(r, name);
      std::string msg = "`FullyShardedDataParallelPlugin` has no field `" + name + "` (a key of the dict passed with `**`)" +
                        whereMissing(r, name, true) + ": the call raises `TypeError: __init__() got an unexpected keyword argument '" +
                        name + "'`";
      if (!to.empty()) msg += "; the field is `" + to + "`";
      cx.report(info(), site, std::move(msg), {}, std::nullopt);
    }
  }

  const RuleInfo* info_;
};

}  // namespace

std::unique_ptr<Rule> makeSL403(const RuleInfo* info) { return std::make_unique<PluginFieldNotRead>(info); }

}  // namespace shardlint::rules
