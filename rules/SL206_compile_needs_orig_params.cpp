// SL206 compile-needs-orig-params: `torch.compile` of an FSDP1 model whose `use_orig_params` is not True
// (FSDP1's default is False): in code (`torch.compile(FSDP(m))`, `FSDP(m).compile()`, `FSDP(torch.compile(m))`)
// and in an accelerate config (FSDP1, `fsdp_use_orig_params: false`, a dynamo backend other than NO).
#include <set>

#include "config/ConfigRule.h"
#include "fsdp/FsdpModel.h"

namespace shardlint::rules {
namespace {

using namespace fsdp;
using config::FsdpSettings;
using config::Role;

// What happens, as measured on torch 2.15.0 (gloo, CPU, 2 ranks) and as reported for torch 2.0.1.
constexpr const char* kWhat =
    "TorchDynamo does not trace modules FSDP1 manages unless `use_orig_params=True` (graph break \"FSDP with "
    "use_orig_params=False\"): that code runs uncompiled, and with `fullgraph=True` the first forward raises "
    "`torch._dynamo.exc.Unsupported` (torch 2.0 raised `AssertionError: Dynamo only supports FSDP with "
    "use_orig_params=True`)";

class CompileNeedsOrigParams final : public config::ConfigRule {
 public:
  using ConfigRule::ConfigRule;

  // A compile call (`compile(`: `torch.compile(` and `.compile(`) and an FSDP1 wrap in the file or its imports.
  std::vector<std::vector<std::string_view>> prescanTokens() const override {
    return {{"compile("}, {"FullyShardedDataParallel", "FSDP"}};
  }
  // The Trainer `fsdp_config` in code is not checked here.
  void onNode(RuleContext&, TSNode) override {}

  void finish(RuleContext& cx) override {
    std::set<std::pair<uint32_t, uint32_t>> seen;
    uint32_t self = cx.analysis().module().fileId();
    for (const auto& root : cx.analysis().roots()) {
      const Store& st = *root.store;
      // Compile after the wrap: `torch.compile(fsdp_model)`, `fsdp_model.compile()`.
      for (const Event* e : domainEvents(st, "compile")) {
        if (e->target == semantic::kNoObj) continue;
        const semantic::Obj& w = st.obj(e->target);
        if (w.tag("fsdp_wrapper") != "fsdp1" || w.tag("replaces") != "1" || w.hasTag("orig_params_splat")) continue;
        semantic::Site primary = at(*e, self);
        if (primary.file != self || !seen.insert({primary.file, primary.range.begin}).second) continue;
        std::string msg = "`" + std::string(e->attr("call")) + "` compiles an FSDP1 model built by `" +
                          std::string(w.tag("wrap_call")) + "(...)` without `use_orig_params=True`" +
                          origin(w.tag("orig_params_as"), w.tag("orig_params_in"), w.hasTag("orig_params_or_config")) +
                          ": " + kWhat + "; pass `use_orig_params=True` to the FSDP call";
        std::string when = onlyWhen(st, {e->point});
        if (!when.empty()) msg += " (this holds " + when + ")";
        std::vector<Note> notes{cx.note(w.origin.site(), "the FSDP1 model is built here")};
        if (primary != e->origin.site()) notes.push_back(cx.note(e->origin.site(), "it is compiled here"));
        cx.report(info(), primary, std::move(msg), std::move(notes), std::nullopt);
      }
      // Compile before the wrap: `FSDP(torch.compile(model))`.
      for (const Event* e : domainEvents(st, "wrap")) {
        if (e->attr("api") != "fsdp1" || e->attr("wraps_compiled") != "1" || e->attr("replaces") != "1" ||
            e->attr("orig_params_splat") == "1")
          continue;
        semantic::Site primary = at(*e, self);
        if (primary.file != self || !seen.insert({primary.file, primary.range.begin}).second) continue;
        std::string msg = "`" + std::string(e->attr("call")) +
                          "(...)` wraps a `torch.compile`d module in FSDP1 without `use_orig_params=True`" +
                          origin(e->attr("orig_params_as"), e->attr("orig_params_in"),
                                 e->attr("orig_params_or_config") == "1") +
                          ": " + kWhat + "; pass `use_orig_params=True` to the FSDP call";
        std::string when = onlyWhen(st, {e->point});
        if (!when.empty()) msg += " (this holds " + when + ")";
        std::vector<Note> notes;
        if (primary != e->origin.site()) notes.push_back(cx.note(e->origin.site(), "it is wrapped here"));
        cx.report(info(), primary, std::move(msg), std::move(notes), std::nullopt);
      }
    }
  }

 private:
  // The compile (or the wrap) itself, when this file writes it; otherwise a site in no file the caller
  // reports. A call of a helper in another module that compiles is not reported at the call: whether it
  // compiles often depends on options the caller passes (`main(["--epochs", "1"])` in a test, without
  // `--torchcompile`), so the finding stays at the compile, in the module that writes it.
  static semantic::Site at(const Event& e, uint32_t self) {
    semantic::Site p = e.origin.site();
    if (p.file != self) p.file = self + 1;
    return p;
  }

  // `use_orig_params=args.orig` bound to False by a default: the expression as written and where it may change.
  static std::string origin(std::string_view as, std::string_view in, bool orConfig) {
    if (as.empty()) return {};
    return " (`use_orig_params=" + oneLine(as) + "` is False " +
           (in.empty() ? std::string(orConfig ? "unless a caller, the command line or a config file it names sets it)"
                                              : "unless a caller or the command line sets it)")
                       : "in " + oneLine(in) + " unless the command line sets it)");
  }

  // An accelerate config: FSDP1, `fsdp_use_orig_params: false` and `dynamo_config.dynamo_backend` (or the
  // older top-level `dynamo_backend`) other than NO. accelerate (0.20 to 1.15) wraps the model in FSDP1 and
  // then calls `torch.compile` on the wrapper in `prepare`.
  void check(ConfigContext& cx, const FsdpSettings& s) override {
    if (s.role != Role::Accelerate || !s.enabled || s.version != 1 || !s.root || !s.root->isMap()) return;
    const auto* orig = s.entry("use_orig_params");
    if (!orig || config::asBool(&orig->second) != false) return;
    const config::YNode* backend = nullptr;
    if (const config::YNode* dyn = s.root->get("dynamo_config"); dyn && dyn->isMap())
      backend = dyn->get("dynamo_backend");
    if (!backend) backend = s.root->get("dynamo_backend");
    if (!backend || !backend->isScalar()) return;
    std::string b = config::asString(backend);
    for (char& c : b) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    // Unquoted `NO` is a YAML 1.1 boolean false; an empty or false value compiles nothing either.
    if (b.empty() || b == "NO" || b == "FALSE" || config::asBool(backend) == false) return;
    cx.report(info(), orig->second.range,
              "`" + orig->first.value + ": " + orig->second.value + "` with accelerate FSDP1 and `dynamo_backend: " +
                  backend->value + "`: `Accelerator.prepare` wraps the model in FSDP1 and then compiles the wrapper; " +
                  kWhat + "; set it to true (or the dynamo backend to NO)",
              {cx.note(backend->range, "accelerate compiles the prepared model with this backend")});
  }
};

}  // namespace

std::unique_ptr<Rule> makeSL206(const RuleInfo* info) { return std::make_unique<CompileNeedsOrigParams>(info); }

}  // namespace shardlint::rules
