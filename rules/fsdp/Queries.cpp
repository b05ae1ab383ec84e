// Queries the SL1xx rules share about optimizers and parameters: the optimizers and domain events that count,
// the parameter sources an optimizer holds (per optimizer built in a loop), frozen parameters, and objects
// created in the analysed code.
#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include "fsdp/FsdpModelImpl.h"

namespace shardlint::rules::fsdp {

using semantic::EventKind;
using semantic::kNoObj;
using semantic::Obj;
using semantic::ObjKind;

ValueSet paramSources(const Store& st, const ValueSet& arg, int depth) {
  ValueSet out;
  if (depth > 32) return out;  // containers may nest (or contain themselves)
  for (ObjId id : arg) {
    const Obj& o = st.obj(id);
    if (o.kind == ObjKind::Literal) continue;
    if (o.kind == ObjKind::Container) {
      for (size_t i = 0; i < o.elements().size(); ++i) {
        if (o.containerKind == 'd' && i < o.keys().size() && o.keys()[i] != "params" && !o.keys()[i].empty() &&
            o.keys()[i] != "**")
          continue;
        semantic::addValues(out, paramSources(st, o.elements()[i], depth + 1));
      }
      continue;
    }
    semantic::addValue(out, id);
  }
  return out;
}

namespace {

// Found once per store and kept with it (Store::readerFacts): most rules ask for both, some several times.
struct OptimizerFacts {
  std::vector<ObjId> ids;
};
const char kOptimizersKey = 0;
struct DomainEventFacts {
  std::map<std::string, std::vector<const Event*>, std::less<>> byName;  // each kind's in the store's order
};
const char kDomainEventsKey = 0;

}  // namespace

std::vector<ObjId> optimizers(const Store& st) {
  return st
      .readerFacts<OptimizerFacts>(&kOptimizersKey,
                                   [&st] {
                                     auto f = std::make_shared<OptimizerFacts>();
                                     for (size_t i = 0; i < st.objects.size(); ++i)
                                       if (st.objects[i].hasTag("optimizer") && !expectedToFail(st, st.objects[i].point) &&
                                           !neverRuns(st, st.objects[i].point))
                                         f->ids.push_back(static_cast<ObjId>(i));
                                     return f;
                                   })
      ->ids;
}

std::vector<const Event*> domainEvents(const Store& st, std::string_view kind) {
  auto facts = st.readerFacts<DomainEventFacts>(&kDomainEventsKey, [&st] {
    auto f = std::make_shared<DomainEventFacts>();
    for (const Event& e : st.events)
      if (e.kind == EventKind::Domain && !expectedToFail(st, e.point) && !neverRuns(st, e.point))
        f->byName[e.name].push_back(&e);
    return f;
  });
  auto it = facts->byName.find(kind);
  return it == facts->byName.end() ? std::vector<const Event*>{} : it->second;
}

std::vector<ValueSet> sourcesPerOptimizer(const Store& st, ObjId opt, const ValueSet& sources) {
  std::vector<ValueSet> groups{sources};
  if (st.regions.empty() || sources.size() < 2) return groups;
  for (const semantic::Region* r : st.regionsAt(st.obj(opt).point)) {
    if (r->kind != "iteration") continue;
    std::vector<ValueSet> next;
    for (const ValueSet& g : groups) {
      // Which of the iteration's objects each source stems from (through containers too).
      std::vector<ValueSet> per;
      ValueSet common;
      for (ObjId s : g) {
        bool any = false;
        for (size_t i = 0; i < r->subject.size(); ++i) {
          ValueSet alt;
          st.flatten({r->subject[i]}, alt);
          if (std::any_of(alt.begin(), alt.end(), [&](ObjId a) { return st.contains(a, s); })) {
            if (per.size() < r->subject.size()) per.resize(r->subject.size());
            semantic::addValue(per[i], s);
            any = true;
          }
        }
        if (!any) semantic::addValue(common, s);
      }
      size_t used = static_cast<size_t>(std::count_if(per.begin(), per.end(), [](const ValueSet& v) { return !v.empty(); }));
      if (used < 2) {
        next.push_back(g);
        continue;
      }
      for (ValueSet& p : per)
        if (!p.empty()) {
          semantic::addValues(p, common);
          next.push_back(std::move(p));
        }
    }
    groups = std::move(next);
  }
  return groups;
}

static bool isFalseLiteral(const Store& st, const ValueSet* vs) {
  auto lit = literalOf(st, vs);
  return lit && *lit == "False";
}

bool frozen(const Store& st, const Lineage& l) {
  for (const Event& e : st.events) {
    bool freeze = (e.kind == EventKind::MethodCall && e.name == "requires_grad_" &&
                   ((!e.args.empty() && isFalseLiteral(st, &e.args[0])) ||
                    std::any_of(e.kwargs.begin(), e.kwargs.end(), [&](const auto& kw) {
                      return kw.first == "requires_grad" && isFalseLiteral(st, &kw.second);
                    }))) ||
                  (e.kind == EventKind::SetAttr && e.name == "requires_grad" && !e.args.empty() &&
                   isFalseLiteral(st, &e.args[0]));
    if (!freeze || e.target == kNoObj) continue;
    Lineage t = lineageOf(st, e.target);
    Lineage frozenModule = isWholeParams(t) ? moduleOfSource(t) : t;
    if (within(l, frozenModule) || within(frozenModule, l)) return true;
  }
  return false;
}

bool isCreatedHere(const Store& st, ObjId root) {
  if (root == kNoObj) return false;
  const Obj& r = st.obj(root);
  if (r.kind != ObjKind::Instance || r.hasTag("optimizer") || r.hasTag("accelerator") || r.hasTag("dataloader") ||
      r.hasTag("scheduler") || r.hasTag("fabric") || r.hasTag("fsdp_wrapper"))
    return false;
  // Built from a whole existing object (`DDP(model)`, `helper(model)`): possibly the same
  // module in another form, not a separate one.
  // Components built inside the call's own arguments (`nn.Sequential(nn.Linear(...))`) are fresh.
  for (const auto& in : r.inputs())
    for (ObjId v : in) {
      const Obj& vo = st.obj(v);
      bool inside = vo.origin.file == r.origin.file && vo.origin.range.begin >= r.origin.range.begin &&
                    vo.origin.range.end <= r.origin.range.end;
      if (isBareObject(st, v) && !inside && !vo.hasTag("free_param") && !vo.hasTag("tensor")) return false;
    }
  return true;
}

}  // namespace shardlint::rules::fsdp
