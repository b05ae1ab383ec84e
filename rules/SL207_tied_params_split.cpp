// SL207 tied-params-split: two modules that share a parameter (a tied input embedding and output
// head) are placed in different FSDP units.
#include <algorithm>
#include <map>
#include <set>

#include "Registry.h"
#include "fsdp/FsdpModel.h"

namespace shardlint::rules {
namespace {

using namespace fsdp;
using semantic::EventKind;
using semantic::kNoObj;

bool hasIndex(const Lineage& l) {
  return std::any_of(l.edges.begin(), l.edges.end(), [](const std::string& e) { return !e.empty() && e[0] == '['; });
}
bool hasCall(const Lineage& l) {
  return std::any_of(l.edges.begin(), l.edges.end(), [](const std::string& e) {
    std::string_view n = edgeName(e);
    return n.size() >= 2 && n.substr(n.size() - 2) == "()";
  });
}

// One tie: `<a>.<attr> = <b>.<attr2>` (or one nn.Parameter assigned to both), with a and b two
// distinct modules of one model, neither inside the other.
struct Tie {
  const Event* set = nullptr;    // the assignment that ties them (the second one for a shared Parameter)
  Lineage a, b;                  // the two owners
  std::string aParam, bParam;    // as written, for messages: `model.head.weight`
};

class TiedParamsSplit final : public Rule {
 public:
  explicit TiedParamsSplit(const RuleInfo* info) : info_(info) {}
  const RuleInfo& info() const override { return *info_; }
  // A wrap, and an attribute assignment that can tie a parameter.
  std::vector<std::vector<std::string_view>> prescanTokens() const override {
    return {{"fully_shard", "FullyShardedDataParallel", "FSDP"}, {".weight", ".bias", "Parameter("}};
  }

  void finish(RuleContext& cx) override {
    std::set<std::pair<uint32_t, uint32_t>> seen;
    for (const auto& root : cx.analysis().roots()) check(cx, *root.store, seen);
    controlsSeen.clear();
  }

 private:
  static bool usable(const Store& st, const Event& e) { return !neverRuns(st, e.point) && !expectedToFail(st, e.point); }

  static bool owners(const Lineage& a, const Lineage& b) {
    return a.root != kNoObj && a.root == b.root && !within(a, b) && !within(b, a) && !hasIndex(a) && !hasIndex(b) &&
           !hasCall(a) && !hasCall(b);
  }

  static std::vector<Tie> ties(const Store& st) {
    std::vector<Tie> out;
    // A Parameter object assigned as an attribute of several modules.
    std::vector<std::pair<ObjId, const Event*>> assigned;
    for (const Event& e : st.events) {
      if (e.kind != EventKind::SetAttr || e.target == kNoObj || e.args.empty() || e.args[0].size() != 1 ||
          !usable(st, e))
        continue;
      ObjId v = e.args[0][0];
      Lineage a = lineageOf(st, e.target);
      std::string aParam = render(st, a) + "." + e.name;
      // `head.weight = embed.weight`: the value is a parameter attribute of another module.
      if (e.name == "weight" || e.name == "bias") {
        Lineage lv = lineageOf(st, v);
        if (!lv.edges.empty()) {
          std::string_view last = edgeName(lv.edges.back());
          if (last == ".weight" || last == ".bias") {
            Lineage b = lv;
            b.edges.pop_back();
            if (owners(a, b)) out.push_back({&e, a, b, aParam, render(st, lv)});
          }
        }
      }
      // `p = nn.Parameter(...)`, then `m1.w = p` and `m2.w = p`.
      if (st.obj(v).hasTag("free_param")) {
        for (const auto& [pv, pe] : assigned) {
          if (pv != v) continue;
          Lineage b = lineageOf(st, pe->target);
          if (owners(a, b)) out.push_back({&e, a, b, aParam, render(st, b) + "." + pe->name});
        }
        assigned.push_back({v, &e});
      }
    }
    return out;
  }

  // The innermost unit (a wrap after the tie) whose module holds `l`; null when none does.
  static const Event* unitOf(const Store& st, const std::vector<const Event*>& wraps, const Lineage& l,
                             const Event& tie, bool& ambiguous) {
    const Event* best = nullptr;
    size_t depth = 0;
    int tieAt = st.points[static_cast<size_t>(tie.point)].ordinal;
    for (const Event* w : wraps) {
      if (st.points[static_cast<size_t>(w->point)].ordinal < tieAt) continue;
      Lineage t = lineageOf(st, w->target);
      if (!within(l, t)) continue;
      if (hasIndex(t) || hasCall(t)) ambiguous = true;  // an element, a view: which one is unknown
      if (!best || t.edges.size() > depth) {
        best = w;
        depth = t.edges.size();
      } else if (t.edges.size() == depth && !sameCall(*w, *best)) {
        ambiguous = true;  // two wraps of one module (on two paths, or a re-wrap): which unit is unknown
      }
    }
    return best;
  }

  // One call (the same site, reached through the same calls): `fully_shard([a, b])` makes one unit of
  // both; so does, for all the rule can tell, one call in a loop.
  static bool sameCall(const Event& x, const Event& y) {
    return x.origin.file == y.origin.file && x.origin.range.begin == y.origin.range.begin &&
           x.origin.range.end == y.origin.range.end && x.origin.via == y.origin.via;
  }

  static std::string unitText(const Store& st, const Event& w) {
    return "`" + std::string(w.attr("call")) + "(" + render(st, lineageOf(st, w.target)) + ")`";
  }

  // A control (`shardlint probe --controls`): the tied modules in one unit, the root's (`tied-one-unit`) or one
  // `fully_shard([a, b])` call's (`tied-group`). The probe trains the tied stand-in so and reads the tie off.
  void control(RuleContext& cx, const Store& st, const Tie& t, const Event& ua, const Event& ub, uint32_t self,
               std::set<std::pair<uint32_t, uint32_t>>& seen) {
    bool fsdp2 = ua.attr("api") == "fully_shard";
    bool group = ua.target != ub.target;  // one call, two modules: `fully_shard([a, b])`
    if (!fsdp2 && (group || ua.attr("replaces") == "?")) return;
    semantic::Site primary = ua.origin.primaryIn(t.set->origin);
    if (primary.file != self) primary = ua.origin.siteIn(self);
    if (primary.file != self || !seen.insert({primary.file, primary.range.begin}).second) return;
    std::map<std::string, std::string> facts{{"shape", group ? "tied-group" : "tied-one-unit"},
                                             {"wrap_api", fsdp2 ? "fully_shard" : "fsdp1"},
                                             {"fsdp_version", fsdp2 ? "2" : "1"}};
    if (!fsdp2) facts["use_orig_params"] = ua.attr("replaces") == "0" ? "1" : "0";
    std::string msg = "`" + t.aParam + "` is tied to `" + t.bParam + "` and " +
                      (group ? "both modules are sharded by one `" + std::string(ua.attr("call")) + "` call"
                             : "both modules are in the unit of " + unitText(st, ua));
    cx.control(info(), primary, std::move(msg), std::move(facts));
  }

  void check(RuleContext& cx, const Store& st, std::set<std::pair<uint32_t, uint32_t>>& seen) {
    std::vector<const Event*> wraps;
    for (const Event* w : domainEvents(st, "wrap")) {
      std::string_view api = w->attr("api");
      if (w->target == kNoObj || (api != "fully_shard" && api != "fsdp1") || alreadyShardedBy(st, *w).root != kNoObj)
        continue;
      wraps.push_back(w);
    }
    if (wraps.empty()) return;
    uint32_t self = cx.analysis().module().fileId();
    for (const Tie& t : ties(st)) {
      bool ambiguous = false;
      const Event* ua = unitOf(st, wraps, t.a, *t.set, ambiguous);
      const Event* ub = unitOf(st, wraps, t.b, *t.set, ambiguous);
      // Both must be in some unit, in two units known apart: one call that takes both
      // (`fully_shard([a, b])`) is one unit.
      if (ambiguous || !ua || !ub) continue;
      // The tie and both wraps under the same unknown conditions (none, or one `if` around them all). A tie
      // under `if tie_word_embeddings:` and a separate unit under `if not self.tie_word_embeddings:` (OLMo-core)
      // never meet; the engine does not relate two conditions, so any difference keeps the rule silent.
      auto conds = [&](semantic::PointId p) {
        std::vector<std::string> c = st.conditionsAt(p);
        std::sort(c.begin(), c.end());
        return c;
      };
      if (conds(t.set->point) != conds(ua->point) || conds(ua->point) != conds(ub->point)) continue;
      if (sameCall(*ua, *ub)) {
        control(cx, st, t, *ua, *ub, self, controlsSeen);
        continue;
      }
      if (ua->attr("api") != ub->attr("api")) continue;  // FSDP1 and FSDP2 mixed: another problem
      Lineage la = lineageOf(st, ua->target), lb = lineageOf(st, ub->target);
      // The unit that splits them: the deeper one (a unit of its own inside the other's module).
      const Event* split = la.edges.size() >= lb.edges.size() ? ua : ub;
      const Event* other = split == ua ? ub : ua;
      // In the frame the tie was reached through: the outermost call of a helper that wraps.
      semantic::Site primary = split->origin.primaryIn(t.set->origin);
      if (primary.file != self) primary = split->origin.siteIn(self);
      if (primary.file != self || !seen.insert({primary.file, primary.range.begin}).second) continue;
      bool fsdp2 = ua->attr("api") == "fully_shard";
      // A unit whose module holds both (the root) lazily initialises them together.
      bool common = std::any_of(wraps.begin(), wraps.end(), [&](const Event* w) {
        Lineage l = lineageOf(st, w->target);
        return within(t.a, l) && within(t.b, l);
      });
      std::string consequence;
      if (fsdp2 && common)
        consequence = "torch (2.13 and later) raises `ValueError: Parameter '...' is shared with a parameter already "
                      "managed by another FSDP group` at the first forward";
      else if (fsdp2)
        consequence = "each unit shards and updates its own copy of the shared parameter, so the tied weights "
                      "silently drift apart";
      else if (ua->attr("replaces") == "0" && ub->attr("replaces") == "0")
        consequence = "with `use_orig_params=True` the first forward fails (a RuntimeError: one module sees the "
                      "other unit's sharded view)";
      else if (ua->attr("replaces") == "1" && ub->attr("replaces") == "1")
        consequence = "each unit flattens its own copy of the shared parameter, so the tied weights silently drift "
                      "apart";
      else
        consequence = "the tied weights silently drift apart (each unit flattens its own copy) or, with "
                      "`use_orig_params=True`, the first forward fails";
      std::string a = render(st, t.a), b = render(st, t.b);
      std::string fix = fsdp2 ? "shard both in one unit (`fully_shard([" + b + ", " + a + "])`) or leave both to the "
                                "root's unit"
                              : "wrap both in one FSDP unit (leave both to their common parent's unit)";
      std::string msg = "`" + t.aParam + "` is tied to `" + t.bParam + "`, but `" + render(st, split == ua ? t.a : t.b) +
                        "` is sharded by " + unitText(st, *split) + " and `" + render(st, split == ua ? t.b : t.a) +
                        "` by " + unitText(st, *other) + "; modules that share a parameter must be in the same FSDP "
                        "unit: " + consequence + "; " + fix;
      if (std::string when = onlyWhen(st, {t.set->point, ua->point, ub->point}); !when.empty())
        msg += " (this holds " + when + ")";
      std::vector<Note> notes;
      notes.push_back(cx.note(t.set->origin.primaryIn(split->origin), "the parameter is tied here"));
      notes.push_back(cx.note(other->origin.primaryIn(split->origin),
                              "`" + render(st, split == ua ? t.b : t.a) + "` is in the unit of this call"));
      cx.report(info(), primary, std::move(msg), std::move(notes), std::nullopt);
    }
  }

  const RuleInfo* info_;
  std::set<std::pair<uint32_t, uint32_t>> controlsSeen;
};

}  // namespace

std::unique_ptr<Rule> makeSL207(const RuleInfo* info) { return std::make_unique<TiedParamsSplit>(info); }

}  // namespace shardlint::rules
