// Lineages: an object as a root and the attribute, index and call edges that lead to it, with FSDP wrappers
// (and functions of a whole object) looked through; comparing them and rendering them for messages.
#include <algorithm>
#include <cctype>
#include <set>

#include "fsdp/FsdpModelImpl.h"

namespace shardlint::rules::fsdp {

using semantic::kNoObj;
using semantic::Obj;
using semantic::ObjKind;

// A whole object (a model, an argument), not an attribute, element, literal or display.
bool isBareObject(const Store& st, ObjId id) {
  ObjKind k = st.obj(id).kind;
  return k == ObjKind::Instance || k == ObjKind::Arg || k == ObjKind::Global;
}

bool isPlainClass(const semantic::ClassDef& cls) {
  for (const auto& b : cls.allBases())
    if (b != "object" && b != "abc.ABC" && b != "typing.Generic" && b != "typing.NamedTuple") return false;
  return true;
}

// Storing a module in an attribute makes it a submodule only when the holder is an
// nn.Module: a plain class (`class Guard:` keeping `self.module = module`) only
// refers to it, so the module keeps its own identity.
static bool canOwnModules(const Store& st, ObjId owner) {
  const Obj& o = st.obj(owner);
  if (o.kind != ObjKind::Instance || !o.cls) return true;
  return !isPlainClass(*o.cls);
}

ObjId objectAt(const Store& st, const Lineage& l) {
  ObjId cur = l.root;
  for (const auto& edge : l.edges) {
    if (cur == kNoObj) return kNoObj;
    ObjId next = kNoObj;
    for (size_t i = 0; i < st.objects.size() && next == kNoObj; ++i)
      if (st.objects[i].owner == cur && st.objects[i].ownerEdge() == edge) next = static_cast<ObjId>(i);
    cur = next;
  }
  return cur;
}

static Lineage lineageImpl(const Store& st, ObjId o, int depth, bool lookThrough);

Lineage lineageOf(const Store& st, ObjId o, int depth) { return lineageImpl(st, o, depth, true); }

Lineage writtenLineage(const Store& st, ObjId o) { return lineageImpl(st, o, 0, false); }

std::string_view edgeName(std::string_view edge) {
  size_t mark = edge.find(kCallSiteMark);
  return mark == std::string_view::npos ? edge : edge.substr(0, mark);
}

// Methods of nn.Module (and of containers) whose result is a view of the receiver, or the receiver
// itself: calling them twice gives the same thing.
bool isViewCall(std::string_view edge) {
  static const std::set<std::string_view> views = {
      ".parameters()", ".named_parameters()", ".modules()", ".named_modules()", ".children()", ".named_children()",
      ".buffers()", ".named_buffers()", ".state_dict()", ".values()", ".items()", ".keys()", ".to()", ".cuda()",
      ".cpu()", ".float()", ".half()", ".bfloat16()", ".double()", ".train()", ".eval()", ".requires_grad_()",
      ".get_submodule()", ".get_parameter()", ".get_input_embeddings()", ".get_output_embeddings()",
      ".get_base_model()", ".get_decoder()", ".get_encoder()", ".base_model()", ".unwrap()", ".module()"};
  return views.count(edge) > 0;
}

// A lineage edge for derived object `id`: a call that makes something carries its site.
static std::string edgeOf(const Obj& d) {
  const std::string& name = d.name;
  if (name.size() < 2 || name.compare(name.size() - 2, 2, "()") != 0 || isViewCall(name)) return name;
  return name + kCallSiteMark + std::to_string(d.origin.file) + ":" + std::to_string(d.origin.range.begin);
}

static Lineage lineageImpl(const Store& st, ObjId o, int depth, bool lookThrough) {
  std::vector<std::string> edges;
  ObjId cur = o;
  while (cur != kNoObj && st.obj(cur).kind == ObjKind::Derived) {
    edges.push_back(edgeOf(st.obj(cur)));
    cur = st.obj(cur).parent;
  }
  std::reverse(edges.begin(), edges.end());
  if (cur != kNoObj && st.obj(cur).owner != kNoObj && depth < 32 && canOwnModules(st, st.obj(cur).owner)) {
    const Obj& r = st.obj(cur);
    Lineage outer = lineageImpl(st, r.owner, depth + 1, lookThrough);
    outer.edges.push_back(r.ownerEdge());
    outer.edges.insert(outer.edges.end(), edges.begin(), edges.end());
    return outer;
  }
  if (cur != kNoObj && depth < 32 && lookThrough) {
    const Obj& r = st.obj(cur);
    // The lineage of the object `r` stands for, continued by `edges` less a leading
    // edge that steps into the wrapper's inner module.
    auto through = [&](std::string_view innerA, std::string_view innerB) {
      Lineage inner = lineageOf(st, r.inputs()[0][0], depth + 1);
      size_t skip = !edges.empty() && (edges[0] == innerA || edges[0] == innerB) ? 1 : 0;
      inner.edges.insert(inner.edges.end(), edges.begin() + static_cast<long>(skip), edges.end());
      return inner;
    };
    // An unknown *function* applied to a whole object (`torch.compile(model)`,
    // `get_peft_model(model)`, `apply_checkpointing(model)`) stands for that object.
    std::string_view fn = lastComponent(r.name);
    // `copy.deepcopy(model)` / `copy.copy(model)` are new objects: sharding the copy
    // leaves the original (and an optimizer of it) alone.
    bool copies = r.name == "copy.deepcopy" || r.name == "copy.copy";
    bool untagged = r.tags().empty() || (r.tags().size() == 1 && r.hasTag("optimizer_use"));
    if (r.kind == ObjKind::Instance && untagged && !r.cls && !fn.empty() && !copies &&
        std::islower(static_cast<unsigned char>(fn[0])) && !r.inputs().empty() && r.inputs()[0].size() == 1 &&
        isBareObject(st, r.inputs()[0][0]))
      return through("._orig_mod", ".module");
    if (r.hasTag("fsdp_wrapper") && r.inputs().size() == 1 && r.inputs()[0].size() == 1)
      return through(".module", "._fsdp_wrapped_module");
  }
  return Lineage{cur, std::move(edges)};
}

static bool edgeMatches(const std::string& a, const std::string& b) {
  if (a == b) return true;
  bool ai = !a.empty() && a[0] == '[', bi = !b.empty() && b[0] == '[';
  return ai && bi && (a == "[*]" || b == "[*]");
}

bool sameLineage(const Lineage& a, const Lineage& b) { return a.root != kNoObj && within(a, b) && within(b, a); }

bool within(const Lineage& a, const Lineage& b) {
  if (a.root != b.root || a.root == kNoObj || b.edges.size() > a.edges.size()) return false;
  for (size_t i = 0; i < b.edges.size(); ++i)
    if (!edgeMatches(a.edges[i], b.edges[i])) return false;
  return true;
}

static bool isParamsEdge(const std::string& e) {
  return e == ".parameters()" || e == ".named_parameters()";
}

Lineage moduleOfSource(const Lineage& src) {
  Lineage m = src;
  for (size_t i = src.edges.size(); i-- > 0;) {
    if (isParamsEdge(src.edges[i])) {
      m.edges.resize(i);
      return m;
    }
  }
  while (!m.edges.empty() && m.edges.back()[0] == '[') m.edges.pop_back();
  if (!m.edges.empty() && m.edges.back()[0] == '.' && edgeName(m.edges.back()).back() != ')') m.edges.pop_back();
  return m;
}

bool isWholeParams(const Lineage& src) {
  return std::any_of(src.edges.begin(), src.edges.end(), isParamsEdge);
}

std::string render(const Store& st, const Lineage& l) {
  std::string s = l.root == kNoObj ? "?" : st.describe(l.root);
  for (const auto& e : l.edges) s += edgeName(e);
  return s;
}

}  // namespace shardlint::rules::fsdp
