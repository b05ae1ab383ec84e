// accelerate's `Accelerator.prepare` (the wraps it makes, the optimizers it re-points, SL201's FSDP2 facts)
// and `prepare_model` under FSDP2.
#include <algorithm>

#include "fsdp/FsdpModelImpl.h"

namespace shardlint::rules::fsdp {

using semantic::CallSite;
using semantic::EventKind;
using semantic::Obj;
using semantic::ObjKind;

bool handlePrepare(CallSite& site, const Obj& acc) {
  Store& st = site.in.store();
  std::string fsdp(acc.tag("fsdp"));
  std::string orig(acc.tag("use_orig_params"));
  std::string origFrom(acc.tag("orig_from"));
  std::string prepareId = std::to_string(site.origin.file) + ":" + std::to_string(site.origin.range.begin);
  std::vector<ValueSet> results;
  std::vector<ObjId> optimizersSeen;
  std::string call = calleeText(site);
  if (site.args.size() >= 2)  // an object built from parameters prepared with others is the optimizer
    for (const ValueSet& arg : site.args) noteOptimizerUse(st, arg, 0, true);
  for (const ValueSet& arg : site.args) {
    if (fsdp.empty() || anyTagged(st, arg, "optimizer") || anyTagged(st, arg, "dataloader") ||
        anyTagged(st, arg, "scheduler")) {
      for (ObjId id : arg)
        if (st.obj(id).hasTag("optimizer")) optimizersSeen.push_back(id);
      results.push_back(arg);
      continue;
    }
    ValueSet out;
    for (ObjId m : arg) {
      if (st.obj(m).hasTag("fsdp_wrapper")) {  // already wrapped: prepare() does not wrap it again
        semantic::addValue(out, m);
        continue;
      }
      std::string replaces = fsdp == "2" ? "1" : orig == "False" ? "1" : orig == "True" ? "0" : "?";
      std::map<std::string, std::string, std::less<>> attrs{{"api", "accelerate"},     {"fsdp_version", fsdp},
                                                            {"replaces", replaces},    {"prepare", prepareId},
                                                            {"call", call},            {"orig_from", origFrom}};
      for (const char* k : {"config", "config_line", "config_col", "config_value", "plugin_call", "plugin_args"})
        if (acc.hasTag(k)) attrs[k] = std::string(acc.tag(k));
      if (fsdp == "1") attrs["sharding"] = acc.hasTag("sharding") ? std::string(acc.tag("sharding")) : "?";
      site.in.domainEvent("wrap", m, site.origin, std::move(attrs));
      if (fsdp == "2") {
        semantic::addValue(out, m);
      } else {
        ObjId w = site.in.newObject(ObjKind::Instance, "accelerate.prepared_model", site.origin);
        st.obj(w).setTag("fsdp_wrapper", "accelerate");
        st.obj(w).setInputs({{m}});
        semantic::addValue(out, w);
      }
    }
    results.push_back(out);
  }
  // SL201's fact: what one FSDP2 `prepare` call holds. accelerate (1.6+) counts the torch modules and
  // optimizers among the arguments and raises a ValueError unless both are there or neither is.
  // "optimizers": arguments that are certainly an optimizer (a known optimizer class); "others":
  // arguments that are neither such an optimizer nor a known dataloader or scheduler (maybe a model).
  if (fsdp == "2" && !acc.hasTag("accelerate_before_fsdp2") && !acc.hasTag("fsdp_conditional")) {
    size_t certainOpt = 0, others = 0;
    for (const ValueSet& arg : site.args) {
      bool opt = !arg.empty() && std::all_of(arg.begin(), arg.end(), [&](ObjId id) {
        const Obj& o = st.obj(id);
        return o.hasTag("optimizer") && isOptimizerQualname(o.name);
      });
      bool known = !arg.empty() && std::all_of(arg.begin(), arg.end(), [&](ObjId id) {
        return st.obj(id).hasTag("dataloader") || st.obj(id).hasTag("scheduler");
      });
      if (opt) ++certainOpt;
      else if (!known) ++others;
    }
    std::map<std::string, std::string, std::less<>> attrs{{"prepare", prepareId},
                                                          {"call", call},
                                                          {"optimizers", std::to_string(certainOpt)},
                                                          {"others", std::to_string(others)},
                                                          {"wrapped_optimizers", std::to_string(optimizersSeen.size())},
                                                          {"splat", site.splat ? "1" : "0"}};
    for (const char* k : {"config", "config_line", "config_col"})
      if (acc.hasTag(k)) attrs[k] = std::string(acc.tag(k));
    site.in.domainEvent("accelerate_fsdp2_prepare", site.receiver, site.origin, std::move(attrs));
  }
  // accelerate re-points a pre-built optimizer only on the FSDP2 path (fsdp2_switch_optimizer_parameters).
  if (fsdp == "2")
    for (ObjId o : optimizersSeen)
      site.in.domainEvent("repoint", o, site.origin,
                          {{"prepare", prepareId}, {"fsdp_version", fsdp}, {"call", call}});
  site.result = makeResult(site.in, results, site.origin);
  return true;
}

// SL201's fact: `accelerator.prepare_model(model)` under FSDP2 raises `ValueError: FSDP2 preparation should be
// done via accelerate.prepare()` unless `evaluation_mode=True`, the model was already prepared (it returns
// early), or tensor parallelism is on (an earlier branch). Each is a reason for no event here.
void noteFsdp2PrepareModel(CallSite& site, const Obj& acc) {
  Store& st = site.in.store();
  if (acc.tag("fsdp") != "2" || acc.hasTag("accelerate_before_fsdp2") || acc.hasTag("fsdp_conditional") ||
      acc.hasTag("parallelism_config") ||
      site.splat)
    return;
  const ValueSet* model = site.arg(0, "model");
  if (!model || model->empty()) return;
  auto prepared = [&](ObjId m) {  // by an earlier `prepare`: prepare_model returns it unchanged
    return std::any_of(st.events.begin(), st.events.end(), [&](const Event& e) {
      return e.kind == EventKind::Domain && e.name == "wrap" && e.target == m && e.attr("api") == "accelerate";
    });
  };
  for (ObjId m : *model) {
    const Obj& o = st.obj(m);
    if (prepared(m) || o.hasTag("fsdp_wrapper") || o.hasTag("optimizer") ||
        o.hasTag("dataloader") || o.hasTag("scheduler") || o.kind == ObjKind::Literal)
      return;
  }
  if (const ValueSet* eval = site.arg(2, "evaluation_mode")) {
    auto lit = literalOf(st, eval);
    if (!lit || *lit != "False") return;
  }
  std::map<std::string, std::string, std::less<>> attrs{{"call", calleeText(site)}};
  for (const char* k : {"config", "config_line", "config_col"})
    if (acc.hasTag(k)) attrs[k] = std::string(acc.tag(k));
  site.in.domainEvent("accelerate_fsdp2_prepare_model", site.receiver, site.origin, std::move(attrs));
}

}  // namespace shardlint::rules::fsdp
