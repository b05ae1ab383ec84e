// SL402 orig-params-false-with-prebuilt-optimizer: accelerate FSDP1 whose use_orig_params is false by
// a linked config or by the in-code plugin's default, with an optimizer built before `prepare`.
#include <filesystem>

#include "Registry.h"
#include "config/Links.h"
#include "fsdp/FsdpModel.h"
#include "fsdp/Staleness.h"

namespace shardlint::rules {
namespace {

using namespace fsdp;

class OrigParamsFalseWithPrebuiltOptimizer final : public Rule {
 public:
  explicit OrigParamsFalseWithPrebuiltOptimizer(const RuleInfo* info) : info_(info) {}
  const RuleInfo& info() const override { return *info_; }
  std::vector<std::vector<std::string_view>> prescanTokens() const override { return optimizerAndWrapTokens(); }

  void finish(RuleContext& cx) override {
    for (const auto& root : cx.analysis().roots()) {
      const Store& st = *root.store;
      auto mine = [](const Event& w) {
        return w.attr("api") == "accelerate" && w.attr("fsdp_version") != "2" &&
               (w.attr("orig_from") == "config" || w.attr("orig_from") == "code-default");
      };
      auto stale = staleOptimizers(st, mine);
      emitControls(cx, info(), st, mine, stale);
      for (const auto& s : stale) {
        bool fromConfig = s.wrap->attr("orig_from") == "config";
        std::string why =
            fromConfig ? "the linked accelerate config sets `fsdp_use_orig_params: false`"
                       : "`FullyShardedDataParallelPlugin(...)` built in code without `use_orig_params=True` "
                         "defaults it to false";
        std::string msg = "optimizer is built from the parameters of `" + render(st, s.module) +
                          "` before accelerate FSDP1 `prepare`, and " + why +
                          ": FSDP1 flattens the parameters and accelerate never re-points the optimizer, so it "
                          "steps stale tensors and training silently does nothing; set `use_orig_params` to true "
                          "(in the config, or `FullyShardedDataParallelPlugin(use_orig_params=True)`), or build the "
                          "optimizer from the prepared model";
        std::vector<Note> extra;
        if (fromConfig)
          if (auto n = linkedConfigNote(*s.wrap, "the setting that decides it")) extra.push_back(*n);
        reportStale(cx, info(), st, s, std::move(msg), std::move(extra),
                    fromConfig ? configFix(*s.wrap) : pluginFix(cx, st, s));
      }
    }
  }

 private:
  // `use_orig_params: false` written in the linked accelerate config (or as an `accelerate launch`
  // flag): the fix writes `true` there. The edit is in that file, not in the script the finding is
  // in. Unsafe, for the reasons below; and the config may serve other scripts too.
  static std::optional<Fix> configFix(const Event& wrap) {
    std::string_view value = wrap.attr("config_value");
    if (value.empty() || wrap.attr("config").empty()) return std::nullopt;
    auto where = config::decodeLocation(std::string(wrap.attr("config")), value);
    if (!where) return std::nullopt;
    return Fix{"Set `use_orig_params` to true in " + std::filesystem::path(where->path).filename().string(),
               Applicability::Unsafe, {Edit{*where, "true"}}};
  }

  // The plugin built in code without `use_orig_params`: the fix adds `use_orig_params=True` to its
  // call, in the file the finding is in. Unsafe: accelerate then keeps the original parameters, a
  // change to how the model is sharded that the user should review (and the optimizer is then
  // re-pointed at the sharded parameters by `prepare`).
  std::optional<Fix> pluginFix(RuleContext& cx, const Store& st, const StaleOptimizer& s) {
    if (s.wrap->attr("orig_from") != "code-default") return std::nullopt;
    std::string_view call = s.wrap->attr("plugin_call");
    size_t colon = call.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    uint32_t file = 0, end = 0;
    try {
      file = static_cast<uint32_t>(std::stoul(std::string(call.substr(0, colon))));
      end = static_cast<uint32_t>(std::stoul(std::string(call.substr(colon + 1))));
    } catch (...) {
      return std::nullopt;
    }
    if (file != st.obj(s.optimizer).origin.primaryIn(s.wrap->origin).file) return std::nullopt;  // another file
    const std::string& text = cx.file(file).text;
    if (end == 0 || end > text.size() || text[end - 1] != ')') return std::nullopt;
    // Insert before the closing parenthesis, after the last argument (and its trailing comma).
    size_t at = end - 1;
    while (at > 0 && (text[at - 1] == ' ' || text[at - 1] == '\t' || text[at - 1] == '\n' || text[at - 1] == '\r')) --at;
    std::string insert;
    bool multiline = text.find('\n', at) < end - 1;  // the `)` on a line of its own
    // The last argument's line indentation, for an argument on a line of its own.
    size_t lineStart = text.rfind('\n', at - 1);
    lineStart = lineStart == std::string::npos ? 0 : lineStart + 1;
    std::string indent = text.substr(lineStart, text.find_first_not_of(" \t", lineStart) - lineStart);
    if (text[at - 1] == '(') insert = "use_orig_params=True";
    else if (multiline && text[at - 1] == ',') insert = "\n" + indent + "use_orig_params=True,";
    else if (multiline) insert = ",\n" + indent + "use_orig_params=True";
    else if (text[at - 1] == ',') insert = " use_orig_params=True";
    else insert = ", use_orig_params=True";
    if (s.wrap->attr("plugin_args") == "0" && text[at - 1] != '(') return std::nullopt;  // not the call we think
    semantic::Site where{file, ByteRange{static_cast<uint32_t>(at), static_cast<uint32_t>(at)}};
    return Fix{"Pass `use_orig_params=True` to `FullyShardedDataParallelPlugin`", Applicability::Unsafe,
               {cx.edit(where, insert)}};
  }

  const RuleInfo* info_;
};

}  // namespace

std::unique_ptr<Rule> makeSL402(const RuleInfo* info) {
  return std::make_unique<OrigParamsFalseWithPrebuiltOptimizer>(info);
}

}  // namespace shardlint::rules
