// Lightning Fabric's `setup` / `setup_module` / `setup_optimizers`: the wraps an FSDP strategy makes, whether
// they replace the parameters, and ModelParallelStrategy's `parallelize_fn`.
#include "fsdp/FsdpModelImpl.h"
#include "fsdp/Versions.h"

namespace shardlint::rules::fsdp {

using semantic::CallSite;
using semantic::EventKind;
using semantic::Obj;

namespace {

// Whether Fabric's FSDPStrategy replaces the parameters it wraps (FSDP1 with use_orig_params=False):
// "1" with `why` set when written in the strategy or implied by a Lightning older than 2.1 that the
// project pins (its strategy defaulted to False; 2.1 made it True); "0" when kept; "?" when unknown.
std::string fabricReplaces(const Obj& fabric, const std::map<std::string, std::string>& facts, std::string& why) {
  std::string_view orig = fabric.tag("use_orig_params");
  if (orig == "False") {
    why = "`FSDPStrategy(use_orig_params=False)`";
    return "1";
  }
  if (orig == "True") return "0";
  if (orig == "?") return "?";
  if (auto pin = pinnedBelow(facts, {"lightning", "pytorch-lightning", "lightning-fabric"}, "2.1")) {
    why = "the project pins " + *pin + ", a Lightning before 2.1, whose `FSDPStrategy` defaults to "
          "`use_orig_params=False`";
    return "1";
  }
  return "0";  // Lightning 2.1+ defaults to use_orig_params=True
}

}  // namespace

bool handleFabric(CallSite& site, const Obj& fabric, const std::map<std::string, std::string>& facts) {
  bool fsdp = fabric.hasTag("fsdp");
  std::string call = calleeText(site);
  if (site.method == "setup" || site.method == "setup_module") {
    if (site.args.empty()) return false;
    std::string why;
    std::string replaces = fsdp ? fabricReplaces(fabric, facts, why) : "";
    if (fsdp)
      for (ObjId m : site.args[0])
        site.in.domainEvent("wrap", m, site.origin,
                            {{"api", "fabric"}, {"fsdp_version", "1"}, {"replaces", replaces}, {"call", call},
                             {"why", why}});
    if (site.method == "setup")
      for (size_t i = 1; i < site.args.size(); ++i) noteOptimizerUse(site.in.store(), site.args[i], 0, true);
    if (fsdp && site.method == "setup")
      for (size_t i = 1; i < site.args.size(); ++i)
        for (ObjId o : site.args[i])
          if (site.in.store().obj(o).hasTag("optimizer")) site.in.domainEvent("repoint", o, site.origin, {{"call", call}});
    // ModelParallelStrategy: the strategy's `setup_module` runs `parallelize_fn(module, device_mesh)` here
    // (its `fully_shard` calls are the wraps); an optimizer passed along is only wrapped
    // (Strategy.setup_optimizer), never re-pointed. The module is sharded in place: the result stands for it.
    if (fabric.hasTag("model_parallel") && !fabric.inputs().empty()) {
      Store& st = site.in.store();
      size_t before = st.events.size();
      ObjId mesh = site.in.derive(site.receiver, ".device_mesh");
      site.in.callCallable(fabric.inputs()[0], {site.args[0], {mesh}}, site.origin);
      for (size_t i = before; i < st.events.size(); ++i)
        if (st.events[i].kind == EventKind::Domain && st.events[i].name == "wrap")
          st.events[i].setAttr("strategy", "ModelParallelStrategy");
    }
    site.result = makeResult(site.in, site.args, site.origin);
    return true;
  }
  if (site.method == "setup_optimizers") {
    site.result = makeResult(site.in, site.args, site.origin);
    return true;
  }
  return false;
}

}  // namespace shardlint::rules::fsdp
