// SL501 cxx-params-registered-after-optimizer: a LibTorch optimizer built from a module's
// parameters, then parameters registered on that module (or a submodule), then the optimizer used.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "Registry.h"

namespace shardlint::rules {
namespace {

using cxx::Event;
using cxx::Function;
using cxx::Path;
using cxx::Program;

bool isOptimizerType(const std::string& name) {
  static const std::set<std::string> kTypes = {"torch::optim::Adam",    "torch::optim::AdamW",
                                               "torch::optim::SGD",     "torch::optim::RMSprop",
                                               "torch::optim::Adagrad", "torch::optim::LBFGS"};
  return kTypes.count(name) > 0;
}

bool isRegistration(const Event& e) {
  return e.kind == Event::Kind::Call && e.callee.rfind("torch::nn::Module::", 0) == 0 &&
         (e.method == "register_module" || e.method == "register_parameter" || e.method == "replace_module");
}

bool isParameterList(const Event& e) {
  return e.kind == Event::Kind::Call && (e.method == "parameters" || e.method == "named_parameters") &&
         e.callee.rfind("torch::nn::Module::", 0) == 0;
}

bool isUse(const Event& e) {
  return e.kind == Event::Kind::Call && (e.method == "step" || e.method == "zero_grad") &&
         e.callee.rfind("torch::optim::", 0) == 0;
}

bool isAddParamGroup(const Event& e) {
  return e.kind == Event::Kind::Call && e.method == "add_param_group" && e.callee.rfind("torch::optim::", 0) == 0;
}

struct Site {
  uint32_t file = 0;
  ByteRange range;
};

// A registration a function makes on its own object or a parameter (or a member of either),
// directly or through the functions it calls.
struct Registration {
  Path where;              // in the function's frame: root This or Param
  Site site;               // the register_* call itself
  std::string what;        // its text, shortened
  std::string inFunction;  // the function that makes it
};

// What a function does that its callers see.
struct Summary {
  std::vector<Registration> registrations;
  std::optional<Path> optimizerOf;  // it builds an optimizer over this object's parameters (This/Param)
  Site optimizerSite;
  std::set<std::string> stepsParam;  // parameters (index as text) it calls step()/zero_grad() on
};

std::string shortText(const SourceFile& f, ByteRange r) {
  std::string s(f.slice(r));
  size_t nl = s.find('\n');
  if (nl != std::string::npos) s = s.substr(0, nl) + " ...";
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// `p` seen from the caller of a call event `e` whose callee's frame `p` is in.
Path toCaller(const Path& p, const Event& e) {
  Path base;
  if (p.root == Path::Root::This) base = e.receiver;
  else if (p.root == Path::Root::Param) {
    size_t i = static_cast<size_t>(std::stoul(p.var));
    if (i < e.argPaths.size()) base = e.argPaths[i];
  } else {
    return p;  // a global
  }
  if (!base.known()) return {};
  base.members.insert(base.members.end(), p.members.begin(), p.members.end());
  base.memberNames.insert(base.memberNames.end(), p.memberNames.begin(), p.memberNames.end());
  return base;
}

bool frameVisible(const Path& p) { return p.root == Path::Root::This || p.root == Path::Root::Param; }

class ParamsAfterOptimizer final : public Rule {
 public:
  explicit ParamsAfterOptimizer(const RuleInfo* info) : info_(info) {}
  const RuleInfo& info() const override { return *info_; }
  bool checksCxx() const override { return true; }
  bool checksPython() const override { return false; }
  std::vector<std::vector<std::string_view>> cxxPrescanTokens() const override {
    return {{"torch/"}, {"optim"}, {"register_module", "register_parameter", "replace_module"}};
  }

  void checkCxx(CxxContext& cx) override {
    const Program& prog = cx.program();
    std::vector<Summary> sums = summarize(cx, prog);
    for (size_t f = 0; f < prog.functions.size(); ++f) simulate(cx, prog, sums, prog.functions[f]);
  }

 private:
  // The object whose parameters the optimizer construction `e` takes (nested parameters() calls or
  // a variable holding their result), in `fn`'s frame.
  static std::optional<Path> optimizedModule(const Function& fn, const Event& e,
                                             const std::map<std::string, Path>& paramLists) {
    for (size_t a = 0; a < e.argEvents.size(); ++a) {
      for (uint32_t k : e.argEvents[a]) {
        const Event& n = fn.events[k];
        if (isParameterList(n) && n.receiver.known()) return n.receiver;
      }
      if (a < e.argPaths.size() && e.argPaths[a].root == Path::Root::Local && e.argPaths[a].members.empty()) {
        auto it = paramLists.find(e.argPaths[a].var);
        if (it != paramLists.end()) return it->second;
      }
    }
    return std::nullopt;
  }

  std::vector<Summary> summarize(CxxContext& cx, const Program& prog) const {
    std::vector<Summary> sums(prog.functions.size());
    // Direct effects.
    for (size_t f = 0; f < prog.functions.size(); ++f) {
      const Function& fn = prog.functions[f];
      std::map<std::string, Path> paramLists;
      for (const Event& e : fn.events) {
        if (isRegistration(e) && frameVisible(e.receiver))
          sums[f].registrations.push_back(
              {e.receiver, {e.file, e.range}, shortText(cx.file(e.file), e.range), fn.qualifiedName});
        if (isParameterList(e) && e.result.root == Path::Root::Local && e.receiver.known())
          paramLists[e.result.var] = e.receiver;
        if (e.kind == Event::Kind::Construct && isOptimizerType(e.callee) && !sums[f].optimizerOf) {
          auto m = optimizedModule(fn, e, paramLists);
          if (m && frameVisible(*m)) {
            sums[f].optimizerOf = *m;
            sums[f].optimizerSite = {e.file, e.range};
          }
        }
        if (isUse(e) && e.receiver.root == Path::Root::Param && e.receiver.members.empty())
          sums[f].stepsParam.insert(e.receiver.var);
      }
    }
    // Through calls, to a fixed point (bounded: each round only adds, and registrations are few).
    for (int round = 0; round < 16; ++round) {
      bool changed = false;
      for (size_t f = 0; f < prog.functions.size(); ++f) {
        for (const Event& e : prog.functions[f].events) {
          if (e.kind != Event::Kind::Call || e.target < 0 || static_cast<size_t>(e.target) == f) continue;
          const Summary& callee = sums[static_cast<size_t>(e.target)];
          for (const Registration& r : callee.registrations) {
            Path mapped = toCaller(r.where, e);
            if (!frameVisible(mapped)) continue;
            auto& mine = sums[f].registrations;
            bool have = std::any_of(mine.begin(), mine.end(), [&](const Registration& x) {
              return x.where == mapped && x.site.file == r.site.file && x.site.range.begin == r.site.range.begin;
            });
            if (have || mine.size() >= 64) continue;
            Registration copy = r;
            copy.where = mapped;
            mine.push_back(std::move(copy));
            changed = true;
          }
          for (const std::string& p : callee.stepsParam) {
            size_t i = static_cast<size_t>(std::stoul(p));
            if (i < e.argPaths.size() && e.argPaths[i].root == Path::Root::Param && e.argPaths[i].members.empty() &&
                sums[f].stepsParam.insert(e.argPaths[i].var).second)
              changed = true;
          }
        }
      }
      if (!changed) break;
    }
    return sums;
  }

  struct Optimizer {
    Path path;    // where it is stored
    Path module;  // whose parameters it took
    Site site;    // its construction (or the helper call that returned it)
    std::string module_text;
    bool pending = false;  // parameters registered after it, not yet added
    Site regSite;          // the first such registration in this function (a call or the register_* call)
    Registration reg;      // the registration itself
    bool reported = false;
  };

  void simulate(CxxContext& cx, const Program& prog, const std::vector<Summary>& sums, const Function& fn) {
    std::vector<Optimizer> opts;
    std::map<std::string, Path> paramLists;
    std::map<std::string, Path> aliases;  // local variable -> the object it names
    auto resolve = [&](Path p) {
      if (p.root == Path::Root::Local) {
        auto it = aliases.find(p.var);
        if (it != aliases.end()) {
          Path base = it->second;
          base.members.insert(base.members.end(), p.members.begin(), p.members.end());
          base.memberNames.insert(base.memberNames.end(), p.memberNames.begin(), p.memberNames.end());
          return base;
        }
      }
      return p;
    };
    auto registered = [&](const Path& where, const Site& here, const Registration& reg) {
      for (auto& o : opts)
        if (!o.pending && where.within(o.module)) {
          o.pending = true;
          o.regSite = here;
          o.reg = reg;
        }
    };
    auto built = [&](const Path& result, const Path& module, const Site& site) {
      for (auto it = opts.begin(); it != opts.end();)
        it = it->path == result ? opts.erase(it) : it + 1;
      opts.push_back({result, module, site, module.render()});
    };
    for (const Event& raw : fn.events) {
      Event e = raw;
      e.receiver = resolve(e.receiver);
      for (auto& a : e.argPaths) a = resolve(a);
      Site here{e.file, e.range};
      if (e.kind == Event::Kind::Assign) {
        if (e.argPaths.empty()) continue;
        const Path& value = e.argPaths[0];
        // A handle to an optimizer: the same optimizer under a second name.
        std::vector<Optimizer> copies;
        for (const auto& o : opts)
          if (o.path == value) {
            Optimizer c = o;
            c.path = e.result;
            copies.push_back(c);
          }
        for (auto it = opts.begin(); it != opts.end();)
          it = it->path == e.result ? opts.erase(it) : it + 1;
        opts.insert(opts.end(), copies.begin(), copies.end());
        if (e.result.root == Path::Root::Local && e.result.members.empty()) aliases[e.result.var] = value;
        continue;
      }
      if (isParameterList(e) && e.result.root == Path::Root::Local && e.receiver.known())
        paramLists[e.result.var] = e.receiver;
      if (e.kind == Event::Kind::Construct && isOptimizerType(e.callee)) {
        auto m = optimizedModule(fn, e, paramLists);
        if (m && e.result.known()) built(e.result, resolve(*m), here);
        continue;
      }
      if (e.kind != Event::Kind::Call) continue;
      if (isRegistration(e) && e.receiver.known()) {
        registered(e.receiver, here, {e.receiver, here, shortText(cx.file(e.file), e.range), fn.qualifiedName});
        continue;
      }
      if (isAddParamGroup(e)) {
        for (auto& o : opts)
          if (o.path == e.receiver) o.pending = false;
        continue;
      }
      if (isUse(e)) {
        for (auto& o : opts)
          if (o.path == e.receiver) use(cx, o, here);
        continue;
      }
      if (e.target < 0) continue;
      const Summary& callee = sums[static_cast<size_t>(e.target)];
      for (const Registration& r : callee.registrations) {
        Path mapped = toCaller(r.where, e);
        if (mapped.known()) registered(mapped, here, r);
      }
      for (const std::string& p : callee.stepsParam) {
        size_t i = static_cast<size_t>(std::stoul(p));
        if (i < e.argPaths.size())
          for (auto& o : opts)
            if (o.path == e.argPaths[i]) use(cx, o, here);
      }
      if (callee.optimizerOf && e.result.known()) {
        Path m = toCaller(*callee.optimizerOf, e);
        if (m.known()) built(e.result, m, here);
      }
    }
    // An optimizer kept in a member (built in a constructor, say) with parameters registered after
    // it: any step()/zero_grad() on that member elsewhere is a use.
    for (auto& o : opts) {
      if (!o.pending || o.reported || o.path.root != Path::Root::This || o.path.members.empty()) continue;
      const std::string& field = o.path.members.back();
      for (const Function& other : prog.functions) {
        if (&other == &fn) continue;
        for (const Event& e : other.events)
          if (!o.reported && isUse(e) && !e.receiver.members.empty() && e.receiver.members.back() == field)
            use(cx, o, Site{e.file, e.range});
      }
    }
  }

  void use(CxxContext& cx, Optimizer& o, const Site& at) {
    if (!o.pending || o.reported) return;
    o.reported = true;
    std::string msg = "optimizer is built from the parameters of `" + o.module_text +
                      "`, and parameters are registered on it afterwards (`" + o.reg.what + "` in `" +
                      o.reg.inFunction +
                      "`); the optimizer never sees them, so `step()` leaves them at their initial values and "
                      "nothing reports it; build the optimizer once the module is complete, or pass the new "
                      "parameters to `add_param_group`";
    std::vector<Note> notes;
    bool direct = o.regSite.file == o.reg.site.file && o.regSite.range.begin == o.reg.site.range.begin;
    if (!direct) notes.push_back(cx.note(o.regSite.file, o.regSite.range, "this call registers new parameters"));
    notes.push_back(cx.note(o.reg.site.file, o.reg.site.range, "registered after the optimizer was built"));
    notes.push_back(cx.note(at.file, at.range, "the optimizer is used here without them"));
    cx.report(*info_, o.site.file, o.site.range, std::move(msg), std::move(notes));
  }

  const RuleInfo* info_;
};

}  // namespace

std::unique_ptr<Rule> makeSL501(const RuleInfo* info) { return std::make_unique<ParamsAfterOptimizer>(info); }

}  // namespace shardlint::rules
