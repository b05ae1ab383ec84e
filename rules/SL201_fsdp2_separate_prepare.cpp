// SL201 fsdp2-separate-prepare: accelerate FSDP2 with the model and the optimizer prepared in separate
// `prepare` calls, or a model prepared with `prepare_model`; accelerate refuses both with a ValueError.
#include <set>

#include "Registry.h"
#include "fsdp/FsdpModel.h"
#include "fsdp/Staleness.h"

namespace shardlint::rules {
namespace {

using namespace fsdp;

size_t count(const Event& e, std::string_view k) {
  try {
    return static_cast<size_t>(std::stoul(std::string(e.attr(k))));
  } catch (...) {
    return 0;
  }
}

// The linked accelerate config that turns FSDP2 on, as a note; none when FSDP2 comes from the code.
std::optional<Note> configNote(const Event& e) {
  return linkedConfigNote(e, "FSDP2 is enabled by this accelerate config");
}

class Fsdp2SeparatePrepare final : public Rule {
 public:
  explicit Fsdp2SeparatePrepare(const RuleInfo* info) : info_(info) {}
  const RuleInfo& info() const override { return *info_; }
  // `prepare` alone is a common word (`prepare_latents`): a `.prepare(` call, in a file that names accelerate (an
  // `accelerator` parameter of a helper does).
  std::vector<std::vector<std::string_view>> prescanTokens() const override {
    return {{".prepare(", ".prepare_model("}, {"accelerate", "Accelerator"}};
  }

  void finish(RuleContext& cx) override {
    std::set<std::pair<uint32_t, uint32_t>> seen;
    uint32_t self = cx.analysis().module().fileId();
    for (const auto& root : cx.analysis().roots()) {
      const Store& st = *root.store;
      auto prepares = domainEvents(st, "accelerate_fsdp2_prepare");
      for (const Event* opt : prepares) {
        // Certainly an optimizer without a model: every argument a known optimizer, dataloader or scheduler.
        if (opt->attr("splat") == "1" || count(*opt, "optimizers") == 0 || count(*opt, "others") != 0) continue;
        // ... after (on some path) the same accelerator prepared something else alone, with no optimizer.
        const Event* model = nullptr;
        for (const Event* m : prepares) {
          if (m == opt || m->target != opt->target || m->attr("splat") == "1" || count(*m, "others") == 0 ||
              count(*m, "optimizers") != 0 || count(*m, "wrapped_optimizers") != 0)
            continue;
          if (!st.mayHappenBefore(m->point, opt->point)) continue;
          model = m;
          break;
        }
        if (!model) continue;
        semantic::Site primary = opt->origin.siteIn(self);
        if (primary.file != self || !seen.insert({primary.file, primary.range.begin}).second) continue;
        std::string call(opt->attr("call"));
        std::string msg =
            "with accelerate FSDP2 the optimizer is prepared in a call of its own, apart from the model (prepared "
            "alone by an earlier `" + std::string(model->attr("call")) + "(...)`): `Accelerator.prepare` raises "
            "`ValueError: When using FSDP2, a model and optimizer must be passed together to "
            "Accelerator.prepare()`, on whichever of the two calls runs first, because it re-points the "
            "optimizer at the sharded parameters while it shards the model; build the optimizer from the "
            "unprepared model and prepare both in one call: `model, optimizer = " + call + "(model, optimizer)`";
        std::vector<Note> notes;
        if (primary != opt->origin.site())
          notes.push_back(cx.note(opt->origin.site(), "the optimizer is prepared alone here"));
        notes.push_back(cx.note(model->origin.primaryIn(opt->origin), "the model is prepared alone here"));
        if (auto n = configNote(*opt)) notes.push_back(*n);
        cx.report(info(), primary, std::move(msg), std::move(notes), std::nullopt);
      }
      for (const Event* e : domainEvents(st, "accelerate_fsdp2_prepare_model")) {
        semantic::Site primary = e->origin.siteIn(self);
        if (primary.file != self || !seen.insert({primary.file, primary.range.begin}).second) continue;
        std::string call(e->attr("call"));
        std::string prepare = call.substr(0, call.size() >= 14 ? call.size() - 14 : 0);  // "accelerator"
        std::string msg = "`" + call + "(...)` with accelerate FSDP2 raises `ValueError: FSDP2 preparation should "
                          "be done via accelerate.prepare(), as it requires a model and an optimizer`; prepare "
                          "the model together with its optimizer: `model, optimizer = " + prepare +
                          ".prepare(model, optimizer)` (or pass `evaluation_mode=True` for a model that is "
                          "not trained)";
        std::vector<Note> notes;
        if (primary != e->origin.site()) notes.push_back(cx.note(e->origin.site(), "`prepare_model` is called here"));
        if (auto n = configNote(*e)) notes.push_back(*n);
        cx.report(info(), primary, std::move(msg), std::move(notes), std::nullopt);
      }
      if (cx.wantsControls()) emitControls(cx, st, prepares, self);
    }
  }

 private:
  // Controls (`shardlint probe --controls`): the preparations SL201 examined and found correct, where the probe
  // can replay them: with FSDP2, a model and its optimizer in one `prepare` call; with FSDP1, a model prepared
  // alone and an optimizer built afterwards from the prepared model (accelerate allows it there).
  void emitControls(RuleContext& cx, const Store& st, const std::vector<const Event*>& prepares, uint32_t self) {
    for (const Event* e : prepares) {
      if (e->attr("splat") == "1" || count(*e, "optimizers") == 0 || count(*e, "others") == 0) continue;
      if (e->origin.site().file != self) continue;
      cx.control(info(), e->origin.site(),
                 "the model and its optimizer are prepared together in one accelerate FSDP2 `" +
                     std::string(e->attr("call")) + "(...)` call",
                 {{"shape", "optimizer-before-wrap"}, {"wrap_api", "accelerate"}, {"fsdp_version", "2"}});
    }
    auto wraps = domainEvents(st, "wrap");
    for (ObjId opt : optimizers(st)) {
      const auto& o = st.obj(opt);
      if (o.inputs().empty() || o.origin.site().file != self) continue;
      ValueSet sources = paramSources(st, o.inputs()[0]);
      for (const Event* w : wraps) {
        std::string_view replaces = w->attr("replaces");
        if (w->target == semantic::kNoObj || w->attr("api") != "accelerate" || w->attr("fsdp_version") != "1" ||
            (replaces != "0" && replaces != "1") || !st.precedes(w->point, o.point) ||
            !sourcesRelatedTo(st, sources, lineageOf(st, w->target)))
          continue;
        cx.control(info(), o.origin.site(),
                   "with accelerate FSDP1 the model is prepared alone by `" + std::string(w->attr("call")) +
                       "(...)` and this optimizer is built afterwards from the prepared model, which FSDP1 allows",
                   {{"shape", "separate-prepare"},
                    {"wrap_api", "accelerate"},
                    {"fsdp_version", "1"},
                    {"use_orig_params", replaces == "0" ? "1" : "0"}});
        break;
      }
    }
  }

  const RuleInfo* info_;
};

}  // namespace

std::unique_ptr<Rule> makeSL201(const RuleInfo* info) { return std::make_unique<Fsdp2SeparatePrepare>(info); }

}  // namespace shardlint::rules
