// SL101 optimizer-before-wrap: an optimizer built from a module's parameters
// before FSDP replaces or flattens them, and still used after the wrap.
#include <algorithm>
#include <cctype>

#include <set>

#include "Registry.h"
#include "fsdp/FsdpModel.h"
#include "fsdp/Staleness.h"

namespace shardlint::rules {
namespace {

using namespace fsdp;
using semantic::EventKind;
using semantic::kNoObj;

class OptimizerBeforeWrap final : public Rule {
 public:
  const RuleInfo& info() const override { return *info_; }
  explicit OptimizerBeforeWrap(const RuleInfo* info) : info_(info) {}

  std::vector<std::vector<std::string_view>> prescanTokens() const override { return optimizerAndWrapTokens(); }

  void finish(RuleContext& cx) override {
    for (const auto& root : cx.analysis().roots()) check(cx, *root.store);
  }

 private:
  static std::string whatHappens(const Event& wrap) {
    std::string_view api = wrap.attr("api");
    if (api == "fully_shard" && !wrap.attr("strategy").empty())
      return "`fully_shard` in the strategy's `parallelize_fn` replaces every parameter with a new sharded DTensor "
             "parameter, so the optimizer keeps stepping the old full-size tensors, which never receive gradients: "
             "training silently does nothing (or Fabric's `setup_optimizers` rejects it, for a model built on the "
             "meta device)";
    if (api == "fully_shard")
      return "`fully_shard` replaces every parameter with a new sharded DTensor parameter, so the optimizer keeps "
             "stepping the old full-size tensors, which never receive gradients: training silently does nothing";
    if (api == "fsdp1") {
      // `use_orig_params=args.use_orig_params`: the value the project's own default gives it, or
      // `cfg.fsdp.use_orig_params`: the value a YAML file the script loads gives it.
      std::string from;
      if (!wrap.attr("orig_params_as").empty())
        from = " (`use_orig_params=" + oneLine(wrap.attr("orig_params_as")) + "` is False " +
               (wrap.attr("orig_params_in").empty()
                    ? std::string(wrap.attr("orig_params_or_config").empty()
                                      ? "unless a caller or the command line sets it)"
                                      : "unless a caller, the command line or a config file it names sets it)")
                    : "in " + oneLine(wrap.attr("orig_params_in")) + " unless the command line sets it)");
      return "FSDP1 without `use_orig_params=True`" + from +
             " flattens the parameters into a FlatParameter, so the optimizer keeps stale tensors that never receive "
             "gradients: training silently does nothing";
    }
    if (api == "accelerate")
      return "accelerate FSDP1 with `use_orig_params=False` wraps the model without re-pointing the optimizer, so it "
             "keeps stale tensors: training silently does nothing";
    return "Fabric's FSDP `setup_module` flattens the parameters (FSDP1 with `use_orig_params=False`: " +
           std::string(wrap.attr("why")) +
           "), so the pre-built optimizer holds none of them: Fabric's `setup_optimizers` rejects it, or training "
           "silently does nothing";
  }

  static std::string fix(const Event& wrap) {
    std::string_view api = wrap.attr("api");
    if (!wrap.attr("strategy").empty())  // `fully_shard` in a ModelParallelStrategy's parallelize_fn
      return "build the optimizer after Fabric's `setup` / `setup_module` ran the `parallelize_fn`, from the set-up "
             "module's parameters (`ModelParallelStrategy` does not re-point an optimizer built before)";
    if (api == "accelerate")
      return "set `use_orig_params=True` in the plugin, or build the optimizer from the prepared model";
    if (api == "fabric")
      return "build the optimizer after `setup_module`, from the set-up module's parameters, or use "
             "`use_orig_params=True`";
    return "build the optimizer after wrapping, from the wrapped model's parameters";
  }

  void check(RuleContext& cx, const Store& st) {
    // accelerate FSDP1 counts here only when `use_orig_params=False` is written in code;
    // defaults and linked configs are SL402's.
    auto mine = [](const Event& w) { return w.attr("api") != "accelerate" || w.attr("orig_from") == "code"; };
    auto stale = staleOptimizers(st, mine);
    for (const auto& s : stale) {
      std::string source = writtenSource(cx, st, s.optimizer, *s.wrap);
      if (source.empty()) source = render(st, s.module);
      std::string msg = "optimizer is built from the parameters of `" + source + "` before " +
                        std::string(wrapApiName(*s.wrap)) + " wraps it; " + whatHappens(*s.wrap) + "; " +
                        fix(*s.wrap);
      // Several stale optimizers reported at one call (a factory whose branches each return one): the
      // conditions choose which optimizer, not whether it is stale, so none is named.
      semantic::Site at = st.obj(s.optimizer).origin.primaryIn(s.wrap->origin);
      bool oneOfSeveral = std::count_if(stale.begin(), stale.end(), [&](const StaleOptimizer& other) {
                            return st.obj(other.optimizer).origin.primaryIn(other.wrap->origin) == at;
                          }) > 1;
      std::string when = oneOfSeveral ? std::string() : onlyWhen(st, {st.obj(s.optimizer).point, s.wrap->point, s.use->point});
      if (!when.empty()) msg += " (this holds " + when + ")";
      reportStale(cx, info(), st, s, std::move(msg), {}, moveFix(cx, st, s));
    }
    // Controls also cover accelerate FSDP2, which re-points a pre-built optimizer (no SL101 there).
    emitControls(cx, info(), st,
                 [&](const Event& w) {
                   return mine(w) || (w.attr("api") == "accelerate" && w.attr("fsdp_version") == "2");
                 },
                 stale);
  }

  // The fix (FSDP1 wrapper and `fully_shard`): move the optimizer's statement, `name = Optimizer(...)`,
  // to just after the wrap's statement, when both are in the linted file and in one block, and the
  // statements from there to the wrap touch neither the optimizer's name nor a name its statement
  // reads (the model's rebinding by the wrap itself aside: the optimizer is then built from the
  // wrapped model, as it must be). Unsafe: the optimizer then holds other tensors, and code
  // between that expected it (a scheduler, a checkpoint load) may need to move too.
  std::optional<Fix> moveFix(RuleContext& cx, const Store& st, const StaleOptimizer& s) {
    std::string_view api = s.wrap->attr("api");
    if ((api != "fully_shard" && api != "fsdp1") || !s.wrap->attr("strategy").empty()) return std::nullopt;
    uint32_t fileId = cx.analysis().module().fileId();
    semantic::Site built = st.obj(s.optimizer).origin.site(), wrapped = s.wrap->origin.site();
    if (built.file != fileId || wrapped.file != fileId) return std::nullopt;
    const std::string& text = cx.file().text;
    TSNode opt = syntax::blockStatementAt(cx.root(), built.range),
           wrap = syntax::blockStatementAt(cx.root(), wrapped.range);
    if (ts_node_is_null(opt) || ts_node_is_null(wrap) || !ts_node_eq(ts_node_parent(opt), ts_node_parent(wrap)) ||
        ts_node_start_byte(opt) >= ts_node_start_byte(wrap))
      return std::nullopt;
    // `name = Optimizer(...)` and nothing else.
    if (std::string_view(ts_node_type(opt)) != "expression_statement" || ts_node_named_child_count(opt) != 1)
      return std::nullopt;
    TSNode assign = ts_node_named_child(opt, 0);
    if (std::string_view(ts_node_type(assign)) != "assignment") return std::nullopt;
    TSNode left = syntax::field(assign, "left"), right = syntax::field(assign, "right");
    if (ts_node_is_null(left) || ts_node_is_null(right) || std::string_view(ts_node_type(left)) != "identifier" ||
        ts_node_start_byte(right) != built.range.begin || ts_node_end_byte(right) != built.range.end)
      return std::nullopt;
    std::string name(syntax::textOf(left, text));
    std::set<std::string> reads = syntax::identifiersIn(right, text);
    std::set<std::string> rebound = syntax::boundNames(wrap, text);
    for (TSNode n = ts_node_next_named_sibling(opt); !ts_node_is_null(n); n = ts_node_next_named_sibling(n)) {
      if (syntax::identifiersIn(n, text).count(name)) return std::nullopt;  // uses the optimizer
      if (ts_node_eq(n, wrap)) break;
      for (const auto& b : syntax::boundNames(n, text))
        if (reads.count(b) && !rebound.count(b)) return std::nullopt;  // changes what it is built from
    }
    // Whole lines: nothing else on the optimizer's lines, nor after the wrap on its last line.
    auto lineStartOf = [&](uint32_t at) {
      size_t nl = at == 0 ? std::string::npos : text.rfind('\n', at - 1);
      return static_cast<uint32_t>(nl == std::string::npos ? 0 : nl + 1);
    };
    auto afterLine = [&](uint32_t at) -> std::optional<uint32_t> {
      size_t nl = text.find('\n', at);
      if (nl == std::string::npos) return std::nullopt;
      return static_cast<uint32_t>(nl + 1);
    };
    uint32_t optBegin = lineStartOf(ts_node_start_byte(opt));
    if (text.find_first_not_of(" \t", optBegin) != ts_node_start_byte(opt)) return std::nullopt;
    auto optEnd = afterLine(ts_node_end_byte(opt));
    auto wrapEnd = afterLine(ts_node_end_byte(wrap));
    if (!optEnd || !wrapEnd) return std::nullopt;
    std::string moved = text.substr(optBegin, *optEnd - optBegin);
    return Fix{"Build `" + name + "` after the wrap", Applicability::Unsafe,
               {cx.edit(semantic::Site{fileId, ByteRange{optBegin, *optEnd}}, ""),
                cx.edit(semantic::Site{fileId, ByteRange{*wrapEnd, *wrapEnd}}, moved)}};
  }

  const RuleInfo* info_;
};

}  // namespace

std::unique_ptr<Rule> makeSL101(const RuleInfo* info) { return std::make_unique<OptimizerBeforeWrap>(info); }

}  // namespace shardlint::rules
