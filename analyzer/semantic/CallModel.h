// The hook through which domain knowledge (in rules/) gives meaning to calls the
// engine cannot see into: library constructors, framework methods.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "semantic/Model.h"

namespace shardlint::semantic {

class Interp;
struct ClassDef;

struct CallSite {
  Interp& in;
  // Plain calls: the callee's qualified name ("torch.optim.AdamW"); for a class
  // defined in the file, its qualified name and `cls` is set. Method calls: empty.
  std::string qualname;
  const ClassDef* cls = nullptr;
  // Method calls on an object: the receiver and the method name.
  ObjId receiver = kNoObj;
  std::string method;
  std::vector<ValueSet> args;
  std::vector<Origin> argOrigins;
  std::vector<std::pair<std::string, ValueSet>> kwargs;
  std::vector<Origin> kwargOrigins;
  Origin origin;  // the call expression
  // `*xs` or `**kw` whose contents are not known passes arguments not listed here.
  bool splat = false;
  // Output: what the call evaluates to. For a class defined in the file it holds the new instance.
  ValueSet result;

  const ValueSet* kwarg(std::string_view name) const;
  // Positional argument i, or the keyword argument `name`.
  const ValueSet* arg(size_t i, std::string_view name) const;
  std::optional<Origin> argOrigin(size_t i, std::string_view name) const;
};

class CallModel {
 public:
  virtual ~CallModel() = default;
  // Return true when the call was understood (result filled in, events recorded).
  virtual bool onCall(CallSite& site) = 0;
  // True for methods whose meaning depends on what the receiver is (accelerate's
  // `prepare`): a function calling them on a parameter is interpreted per call site.
  virtual bool receiverSensitive(std::string_view method) const { (void)method; return false; }
  // True for qualified names in a framework whose API the model gives meaning to
  // (accelerate, Lightning): calls into it are not resolved to its source, even when
  // the project being linted is that framework or vendors it.
  virtual bool frameworkApi(std::string_view qualname) const { (void)qualname; return false; }
  // Settings from configuration that applies to the file being analysed (linked
  // configs); the engine passes them through without interpreting them.
  virtual void setFacts(const std::map<std::string, std::string>& facts) { (void)facts; }
  // For a class a framework drives (a Lightning module), the methods the framework
  // calls on one instance, in the order it calls them. Empty: no known order.
  virtual std::vector<std::string> frameworkOrder(const std::vector<std::string>& bases) const {
    (void)bases;
    return {};
  }
  // An object whose making gives a class's later methods something to say (an optimizer a method may
  // step after a wrap): a constructor that makes one, or records a domain event, has its class's public
  // methods run after it (FileAnalysis's lifecycle). Default: every object the model tagged.
  virtual bool lifecycleAnchor(const Obj& o) const { return !o.tags().empty(); }
};

}  // namespace shardlint::semantic
