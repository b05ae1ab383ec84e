// The C++ probe (`shardlint probe --mode cxx`): a library preloaded (LD_PRELOAD) into the user's
// LibTorch program. It interposes two functions LibTorch exports and calls through its dynamic
// symbol table, records what they see, and writes a report when the program exits:
//   torch::nn::Module::register_parameter  every parameter as it is registered (every layer's
//                                          constructor calls it), with a copy of its initial values
//   torch::optim::Optimizer::add_param_group  every optimizer's parameters (each optimizer's
//                                          constructor calls it), and whether one exists yet
// The report ($SHARDLINT_CXX_PROBE_REPORT, JSON) lists each parameter: the module class it was
// registered on, whether that happened after the first optimizer was built, whether any optimizer
// holds it, whether it has a gradient at the end, and (for optimized ones) whether an optimizer step
// changed it since the optimizer got it.
// The original functions are found with dlsym(RTLD_NEXT). Nothing else in the program changes.
#include <dlfcn.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <map>
#include <string>
#include <vector>

namespace {

struct Param {
  at::Tensor tensor;  // the registered parameter (kept alive until the report)
  std::string name, module;
  bool afterOptimizer = false;
};

struct State {
  std::mutex mu;
  std::vector<Param> params;
  // Every parameter some optimizer holds (TensorImpl*), with its values when the optimizer got it
  // (layers initialise their parameters right after registering them, so that is the first point
  // where "moved" means "an optimizer step changed it").
  std::map<const void*, at::Tensor> optimized;
  int groups = 0;
  bool reportArmed = false;
};

State& probeState() {
  static State* s = new State;  // never destroyed: the report runs at exit
  return *s;
}

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
    else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

void writeReport() {
  State& s = probeState();
  std::lock_guard<std::mutex> lock(s.mu);
  const char* path = std::getenv("SHARDLINT_CXX_PROBE_REPORT");
  FILE* f = path && *path ? std::fopen(path, "w") : stderr;
  if (!f) return;
  std::fprintf(f, "{\"param_groups\": %d, \"parameters\": [", s.groups);
  for (size_t i = 0; i < s.params.size(); ++i) {
    const Param& p = s.params[i];
    bool moved = false, grad = false;
    auto it = s.optimized.find(p.tensor.unsafeGetTensorImpl());
    try {
      if (it != s.optimized.end()) moved = !torch::equal(it->second, p.tensor.detach().to(it->second.device()));
      grad = p.tensor.grad().defined();
    } catch (...) {
    }
    std::fprintf(f,
                 "%s\n {\"name\": %s, \"module\": %s, \"after_optimizer\": %s, \"optimized\": %s, "
                 "\"requires_grad\": %s, \"has_grad\": %s, \"moved\": %s}",
                 i ? "," : "", jsonString(p.name).c_str(), jsonString(p.module).c_str(),
                 p.afterOptimizer ? "true" : "false",
                 it != s.optimized.end() ? "true" : "false",
                 p.tensor.requires_grad() ? "true" : "false", grad ? "true" : "false", moved ? "true" : "false");
  }
  std::fprintf(f, "\n]}\n");
  if (f != stderr) std::fclose(f);
}

void arm(State& s) {
  if (s.reportArmed) return;
  s.reportArmed = true;
  std::atexit(writeReport);  // registered during main: runs before LibTorch's statics are destroyed
}

}  // namespace

namespace torch {
namespace nn {

Tensor& Module::register_parameter(std::string name, Tensor tensor, bool requires_grad) {
  using Real = Tensor& (*)(Module*, std::string, Tensor, bool);
  static Real real = reinterpret_cast<Real>(dlsym(
      RTLD_NEXT,
      "_ZN5torch2nn6Module18register_parameterENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEN2at6TensorEb"));
  if (!real) std::abort();
  std::string kept = name;
  Tensor& registered = real(this, std::move(name), std::move(tensor), requires_grad);
  State& s = probeState();
  std::lock_guard<std::mutex> lock(s.mu);
  arm(s);
  if (registered.defined())
    s.params.push_back({registered, kept, this->name(), s.groups > 0});
  return registered;
}

}  // namespace nn

namespace optim {

void Optimizer::add_param_group(const OptimizerParamGroup& group) {
  using Real = void (*)(Optimizer*, const OptimizerParamGroup&);
  static Real real =
      reinterpret_cast<Real>(dlsym(RTLD_NEXT, "_ZN5torch5optim9Optimizer15add_param_groupERKNS0_19OptimizerParamGroupE"));
  if (!real) std::abort();
  {
    State& s = probeState();
    std::lock_guard<std::mutex> lock(s.mu);
    arm(s);
    ++s.groups;
    for (const auto& p : group.params())
      if (p.defined() && !s.optimized.count(p.unsafeGetTensorImpl()))
        s.optimized.emplace(p.unsafeGetTensorImpl(), p.detach().clone());
  }
  real(this, group);
}

}  // namespace optim
}  // namespace torch
