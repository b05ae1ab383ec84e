// Where code runs: code that never runs where it is analysed, code a test expects to fail, the conditions
// code runs under, wraps that run before a point, and wraps of a part of an already-sharded model.
#include <algorithm>

#include "fsdp/FsdpModelImpl.h"

namespace shardlint::rules::fsdp {

using semantic::EventKind;
using semantic::kNoObj;

namespace {

bool isIntegerText(std::string_view s) {
  if (!s.empty() && s.front() == '-') s.remove_prefix(1);
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The rank of this process, as the code reads it: `torch.distributed.get_rank()`, `int(os.environ["RANK"])`
// (or LOCAL_RANK), an attribute named as a rank by the frameworks (`accelerator.process_index`,
// `self.global_rank`, `args.local_rank`).
bool isRank(const Store& st, ObjId id) {
  if (id == semantic::kNoObj) return false;
  const semantic::Obj& o = st.obj(id);
  if (o.kind == semantic::ObjKind::Instance || o.kind == semantic::ObjKind::Ref) {
    if (o.name == "torch.distributed.get_rank" || o.name == "torch.distributed.distributed_c10d.get_rank")
      return true;
    if (o.name == "int" && !o.inputs().empty())
      for (ObjId in : o.inputs()[0]) {
        const semantic::Obj& e = st.obj(in);
        if (e.kind != semantic::ObjKind::Derived || (e.name != "['RANK']" && e.name != "['LOCAL_RANK']")) continue;
        if (e.parent != semantic::kNoObj && st.obj(e.parent).name == "os.environ") return true;
      }
    return false;
  }
  if (o.kind == semantic::ObjKind::Derived)
    return o.name == ".process_index" || o.name == ".local_process_index" || o.name == ".global_rank" ||
           o.name == ".local_rank";
  return false;
}

// A flag that is true on the main process only (accelerate, Lightning, HF Trainer).
bool isMainFlag(const Store& st, ObjId id) {
  const semantic::Obj& o = st.obj(id);
  return o.kind == semantic::ObjKind::Derived &&
         (o.name == ".is_main_process" || o.name == ".is_local_main_process" || o.name == ".is_global_zero" ||
          o.name == ".is_world_process_zero" || o.name == ".is_local_process_zero");
}

bool allAre(const Store& st, const ValueSet& vs, bool (*pred)(const Store&, ObjId)) {
  return !vs.empty() && std::all_of(vs.begin(), vs.end(), [&](ObjId v) { return pred(st, v); });
}

// What a "the model is (not) sharded yet" test asks: an FSDP1 wrapper object, or a module that
// `fully_shard` made an FSDPModule; nullopt for any other test.
enum class ShardTest { Fsdp1, Fsdp2 };
std::optional<ShardTest> shardTestOf(const semantic::Region& r, std::string_view n) {
  std::string_view last = lastComponent(n);
  if (r.kind == "isinstance") {
    if (last == "FSDPModule") return ShardTest::Fsdp2;
    if (last == "FullyShardedDataParallel" || (startsWith(n, "torch.distributed.") && last == "FSDP"))
      return ShardTest::Fsdp1;
  } else if (r.kind == "hasattr") {
    if (n == "reshard" || n == "unshard") return ShardTest::Fsdp2;
    if (n == "_fsdp_wrapped_module") return ShardTest::Fsdp1;
  }
  return std::nullopt;
}

// The `fully_shard` wraps of a store that count for a "sharded yet" test: in code that runs, not in
// code a test expects to fail; each with the lineage of what it wraps.
struct Fsdp2Wrap {
  semantic::PointId point;
  Lineage lineage;
};

// `v` is sharded at point `at` in the way `test` asks, on every path.
bool shardedAt(const Store& st, ObjId v, ShardTest test, semantic::PointId at, const std::vector<Fsdp2Wrap>& wraps) {
  const semantic::Obj& o = st.obj(v);
  if (test == ShardTest::Fsdp1) return o.tag("fsdp_wrapper") == "fsdp1";
  if (wraps.empty()) return false;
  Lineage l = lineageOf(st, v);
  if (l.root == kNoObj) return false;
  for (const Fsdp2Wrap& w : wraps)
    if (st.dominates(w.point, at) && within(w.lineage, l) && within(l, w.lineage)) return true;
  return false;
}

// Whether the code of region `r` never runs because it runs only when its model is not yet sharded and
// every value the test reads already is there (neverRuns).
bool shardedAlready(const Store& st, const semantic::Region& r, const std::vector<Fsdp2Wrap>& wraps) {
  if (!r.negated || r.subject.empty() || (r.kind != "isinstance" && r.kind != "hasattr")) return false;
  std::vector<ShardTest> tests;
  for (const auto& n : r.names)
    if (auto t = shardTestOf(r, n)) tests.push_back(*t);
  if (tests.empty()) return false;
  // A value that the same variable holds wrapped too, by an FSDP1 wrapper made on every path before
  // the test (`m = FSDP(m)` in an arm its flag always selects, merged with the arm not taken), is
  // that wrapper there.
  semantic::ValueSet wrapped;
  for (ObjId w : r.subject) {
    const semantic::Obj& wo = st.obj(w);
    if (wo.tag("fsdp_wrapper") != "fsdp1" || wo.inputs().empty() || !st.dominates(wo.point, r.begin)) continue;
    for (ObjId v : wo.inputs()[0])
      if (v != w) semantic::addValue(wrapped, v);
  }
  // The test holds (the code runs only when it does not) for every value: some named class matches.
  return std::all_of(r.subject.begin(), r.subject.end(), [&](ObjId v) {
    return std::binary_search(wrapped.begin(), wrapped.end(), v) ||
           std::any_of(tests.begin(), tests.end(), [&](ShardTest t) { return shardedAt(st, v, t, r.begin, wraps); });
  });
}

// Per region of a store, whether shardedAlready holds: found once per store (kept with it), since
// neverRuns is asked for nearly every event and object of a store.
struct NeverRunsFacts {
  std::vector<bool> sharded;
};
const char kNeverRunsKey = 0;

}  // namespace

bool neverRuns(const Store& st, semantic::PointId p) {
  if (st.regions.empty() || p == semantic::kNoPoint) return false;
  if (st.neverRuns(p)) return true;
  auto regions = st.regionsAt(p);
  if (regions.empty()) return false;
  auto facts = st.readerFacts<NeverRunsFacts>(&kNeverRunsKey, [&st] {
    auto f = std::make_shared<NeverRunsFacts>();
    f->sharded.assign(st.regions.size(), false);
    std::vector<Fsdp2Wrap> wraps;
    bool any = false;
    for (const auto& r : st.regions) any = any || (r.negated && !r.subject.empty());
    if (!any) return f;
    for (const Event& e : st.events) {
      if (e.kind != EventKind::Domain || e.name != "wrap" || e.attr("api") != "fully_shard" || e.target == kNoObj)
        continue;
      if (st.neverRuns(e.point) || expectedToFail(st, e.point)) continue;
      wraps.push_back(Fsdp2Wrap{e.point, lineageOf(st, e.target)});
    }
    for (size_t i = 0; i < st.regions.size(); ++i) f->sharded[i] = shardedAlready(st, st.regions[i], wraps);
    return f;
  });
  for (const semantic::Region* r : regions)
    if (facts->sharded[static_cast<size_t>(r - st.regions.data())]) return true;
  return false;
}

std::string onlyWhen(const Store& st, std::initializer_list<semantic::PointId> points) {
  std::vector<std::string> conds;
  for (semantic::PointId p : points)
    for (auto& c : st.conditionsAt(p))
      if (std::find(conds.begin(), conds.end(), c) == conds.end()) conds.push_back(std::move(c));
  if (conds.empty()) return "";
  std::string out = "only when ";
  for (size_t i = 0; i < conds.size(); ++i) {
    if (i) out += " and ";
    out += conds[i];
  }
  return out;
}

bool expectedToFail(const Store& st, semantic::PointId p) {
  if (st.regions.empty()) return false;
  for (const semantic::Region* r : st.regionsAt(p)) {
    if (r->kind != "with") continue;
    for (const auto& n : r->names)
      if (n == "pytest.raises" || n == ".assertRaises" || n == ".assertRaisesRegex" || n == ".assertRaisesRegexp")
        return true;
  }
  return false;
}

Lineage alreadyShardedBy(const Store& st, const Event& wrap) {
  if (wrap.target == kNoObj || st.regions.empty()) return {};
  Lineage target = lineageOf(st, wrap.target);
  for (const semantic::Region* r : st.regionsAt(wrap.point)) {
    if (r->negated) continue;
    bool sharded = false;
    for (const auto& n : r->names) {
      std::string_view last = lastComponent(n);
      if (r->kind == "isinstance")
        sharded = sharded || last == "FSDPModule" || last == "FullyShardedDataParallel" ||
                  (startsWith(n, "torch.distributed.") && last == "FSDP");
      else if (r->kind == "hasattr")
        sharded = sharded || n == "reshard" || n == "unshard" || n == "_fsdp_wrapped_module";
    }
    if (!sharded) continue;
    for (ObjId subj : r->subject) {
      Lineage l = lineageOf(st, subj);
      if (within(target, l)) return l;
    }
  }
  return {};
}

bool wrappedBefore(const Store& st, const Event& w, semantic::PointId p) {
  if (st.dominates(w.point, p)) return true;
  if (!st.precedes(w.point, p)) return false;
  for (int a = st.points[static_cast<size_t>(w.point)].arm; a >= 0 && !st.insideArm(p, a);
       a = st.arms[static_cast<size_t>(a)].parent) {
    const semantic::Arm& arm = st.arms[static_cast<size_t>(a)];
    if (!arm.loop && !arm.alwaysTaken(st)) return false;
  }
  return true;
}

// The rank guard the code at `p` runs under (a "condition" region that lets one rank through and keeps the others
// out), or null.
const semantic::Region* rankGuard(const Store& st, semantic::PointId p) {
  for (const semantic::Region* r : st.regionsAt(p)) {
    if (r->kind != "condition" || r->names.size() < 2) continue;
    const std::string& op = r->names[1];
    if (allAre(st, r->subject, isRank)) {
      bool one = r->names.size() > 2 && isIntegerText(r->names[2]) &&
                 ((op == "==" && !r->negated) || (op == "!=" && r->negated));
      if (one || (op == "truth" && r->negated)) return r;  // `if not rank:`
    } else if (allAre(st, r->subject, isMainFlag)) {
      if ((op == "truth" && !r->negated) || (op == "==" && r->names.size() > 2 && r->names[2] == "True" && !r->negated))
        return r;
    }
  }
  return nullptr;
}

std::string rankGuardText(const semantic::Region& guard) {
  return "`" + guard.names.front() + "`" + (guard.negated ? " is false" : "");
}

}  // namespace shardlint::rules::fsdp
