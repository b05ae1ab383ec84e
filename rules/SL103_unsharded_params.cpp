// SL103 unsharded-params: trainable parameters the optimizer holds are left
// outside every FSDP unit (blocks sharded but not the root; ignored_* params).
#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>

#include "Registry.h"
#include "fsdp/FsdpModel.h"
#include "fsdp/ModuleParts.h"

namespace shardlint::rules {
namespace {

using namespace fsdp;
using semantic::EventKind;
using semantic::kNoObj;
using semantic::ObjKind;

bool startsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
std::string_view lastComponent(std::string_view q) {
  auto dot = q.rfind('.');
  return dot == std::string_view::npos ? q : q.substr(dot + 1);
}
bool isIndexEdge(const std::string& e) { return !e.empty() && e[0] == '['; }
bool isComprehension(std::string_view type) {
  return type == "list_comprehension" || type == "set_comprehension" || type == "generator_expression" ||
         type == "dictionary_comprehension";
}

// The syntax trees of the files that origins point into: the linted file's own, the others
// parsed when first asked for (only for the few wraps and arguments a finding depends on).
class Trees {
 public:
  explicit Trees(RuleContext& cx) : cx_(cx) {}
  TSNode root(uint32_t file) {
    if (file == cx_.analysis().module().fileId()) return cx_.root();
    auto it = trees_.find(file);
    if (it == trees_.end()) {
      if (!parser_) parser_.emplace();
      it = trees_.emplace(file, parser_->parse(cx_.file(file).text)).first;
    }
    return it->second ? it->second.root() : TSNode{};
  }
  std::string_view text(uint32_t file) const { return cx_.file(file).text; }
  // The smallest node spanning `site` (null when the file has no tree).
  TSNode at(const semantic::Site& site) {
    TSNode r = root(site.file);
    if (ts_node_is_null(r)) return r;
    return ts_node_descendant_for_byte_range(r, site.range.begin, site.range.end);
  }

 private:
  RuleContext& cx_;
  std::optional<syntax::Parser> parser_;
  std::map<uint32_t, syntax::Tree> trees_;
};

bool containsType(TSNode n, std::string_view type) {
  if (ts_node_is_null(n)) return false;
  if (std::string_view(ts_node_type(n)) == type) return true;
  for (uint32_t i = 0; i < ts_node_named_child_count(n); ++i)
    if (containsType(ts_node_named_child(n, i), type)) return true;
  return false;
}

// The `if` clauses of a comprehension node (empty when it is not filtered).
std::vector<TSNode> ifClauses(TSNode comp) {
  std::vector<TSNode> out;
  for (TSNode c : syntax::namedChildren(comp))
    if (std::string_view(ts_node_type(c)) == "if_clause") out.push_back(c);
  return out;
}

// A wrap (or a replication) and the object it covers.
struct Unit {
  const Event* event = nullptr;
  Lineage target;
  bool replica = false;  // `replicate(m)` / `DistributedDataParallel(m)`: covered, not sharded
  mutable std::optional<bool> iterated;
};

class UnshardedParams final : public Rule {
 public:
  explicit UnshardedParams(const RuleInfo* info) : info_(info) {}
  const RuleInfo& info() const override { return *info_; }

  std::vector<std::vector<std::string_view>> prescanTokens() const override { return optimizerAndWrapTokens(); }

  void finish(RuleContext& cx) override {
    Trees trees(cx);
    for (const auto& root : cx.analysis().roots()) check(cx, trees, *root.store);
  }

 private:
  // The point runs inside a branch within a loop body (the loop's element is filtered).
  static bool filteredInLoop(const Store& st, semantic::PointId p) {
    bool branch = false;
    for (int a = st.points[static_cast<size_t>(p)].arm; a >= 0; a = st.arms[static_cast<size_t>(a)].parent) {
      if (st.arms[static_cast<size_t>(a)].loop) return branch;
      branch = true;
    }
    return false;
  }

  static bool inLoop(const Store& st, semantic::PointId p) {
    for (int a = st.points[static_cast<size_t>(p)].arm; a >= 0; a = st.arms[static_cast<size_t>(a)].parent)
      if (st.arms[static_cast<size_t>(a)].loop) return true;
    return false;
  }

  // The unit's call runs once per element of something: in a loop, or in a comprehension (here
  // or around a call of the helper that makes it). Only then is `fully_shard(layers[i])` (or the
  // `[1]` an `enumerate` pair gives) a pass over every element rather than one element.
  static bool iterated(const Store& st, Trees& trees, const Unit& u) {
    if (!u.iterated) {
      bool it = inLoop(st, u.event->point);
      std::vector<semantic::Site> sites{u.event->origin.site()};
      sites.insert(sites.end(), u.event->origin.via.begin(), u.event->origin.via.end());
      for (const auto& s : sites) {
        if (it) break;
        for (TSNode n = trees.at(s); !ts_node_is_null(n); n = ts_node_parent(n)) {
          std::string_view type = ts_node_type(n);
          if (isComprehension(type)) it = true;
          if (it || type == "function_definition" || type == "class_definition" || type == "lambda") break;
        }
      }
      u.iterated = it;
    }
    return *u.iterated;
  }

  // The loop's filter is an isinstance test that the module itself may pass: its class
  // (or a base) is among the tested classes, or its class is unknown and the test
  // names `nn.Module`.
  static bool filterMayAccept(const Store& st, semantic::PointId p, const Lineage& module) {
    ObjId m = objectAt(st, module);
    std::vector<std::string> classes;
    if (m != kNoObj && st.obj(m).kind == ObjKind::Instance) {
      classes.push_back(st.obj(m).name);
      if (st.obj(m).cls) for (const auto& b : st.obj(m).cls->allBases()) classes.push_back(b);
    }
    for (const semantic::Region* r : st.regionsAt(p)) {
      if (r->kind != "isinstance" || r->negated) continue;
      for (const auto& n : r->names) {
        if (n == "torch.nn.Module" || n == "torch.nn.modules.module.Module") return true;
        if (std::find(classes.begin(), classes.end(), n) != classes.end()) return true;
      }
    }
    return false;
  }

  // `for block in module: fully_shard(block)` (or over .children() / .values() / .items()) shards
  // every child of `module`, so nothing of it is left outside a unit. An index straight after the
  // module is such a pass only when the call is iterated; `fully_shard(model[1])` is one child.
  static bool coversAllChildren(const Store& st, Trees& trees, const Unit& u, const Lineage& module) {
    const Lineage& t = u.target;
    if (t.root != module.root || t.edges.size() <= module.edges.size() || !within(t, module)) return false;
    size_t k = module.edges.size();
    // `module.modules()` / `named_modules()` yield the module itself too: an unfiltered loop
    // over them shards the root. A filtered one (`if isinstance(m, Block)`, `if type(m) in
    // classes`) picks blocks, which the root is not.
    if (t.edges[k] == ".modules()" || t.edges[k] == ".named_modules()")
      return !filteredInLoop(st, u.event->point) || filterMayAccept(st, u.event->point, module);
    static const char* kIterMethods[] = {".children()", ".named_children()", ".values()", ".items()"};
    size_t i = k;
    if (std::find(std::begin(kIterMethods), std::end(kIterMethods), t.edges[k]) != std::end(kIterMethods)) ++i;
    else if (!isIndexEdge(t.edges[k]) || !iterated(st, trees, u)) return false;
    for (; i < t.edges.size(); ++i)
      if (t.edges[i] != "[*]" && t.edges[i] != "[1]") return false;
    return true;
  }

  // The unit covers `l`: `l` lies inside the unit's module, or the unit passes over all of l's
  // children. The first `fixed` edges are the module the optimizer holds and match as `within`
  // does; below them an index matches another only when the unit is iterated.
  static bool covers(const Store& st, Trees& trees, const Unit& u, const Lineage& l, size_t fixed) {
    const Lineage& t = u.target;
    if (t.root != l.root || t.root == kNoObj) return false;
    if (t.edges.size() > l.edges.size()) return coversAllChildren(st, trees, u, l);
    for (size_t i = 0; i < t.edges.size(); ++i) {
      const std::string &a = l.edges[i], &b = t.edges[i];
      if (a == b && (a != "[*]" || i < fixed)) continue;
      if (isIndexEdge(a) && isIndexEdge(b)) {
        if (i < fixed && (a == "[*]" || b == "[*]")) continue;
        if (iterated(st, trees, u)) continue;
      }
      return false;
    }
    return true;
  }

  // Some unit lies strictly inside `l` (an index matching any other).
  static bool touchesInside(const std::vector<Unit>& units, const Lineage& l) {
    return std::any_of(units.begin(), units.end(), [&](const Unit& u) {
      return u.target.edges.size() > l.edges.size() && within(u.target, l);
    });
  }

  static std::string partName(const Store& st, const Lineage& l) {
    std::string s = render(st, l);
    for (size_t at = s.find("[*]"); at != std::string::npos; at = s.find("[*]", at + 3)) s.replace(at, 3, "[i]");
    return s;
  }

  // The parts of a module that stay outside every unit, when its structure is known.
  struct Walk {
    const Store& st;
    Trees& trees;
    const std::vector<Unit>& units;
    size_t fixed;  // the edges of the module the optimizer holds
    std::vector<std::string> left;

    void add(std::string s) {
      if (std::find(left.begin(), left.end(), s) == left.end()) left.push_back(std::move(s));
    }
    bool covered(const Lineage& l, bool param) {
      return std::any_of(units.begin(), units.end(), [&](const Unit& u) {
        return (!param || u.target.edges.size() < l.edges.size()) && covers(st, trees, u, l, fixed);
      });
    }
    static Holds strongest(const Store& st, const ValueSet& objs) {
      Holds h = Holds::Nothing;
      for (ObjId o : objs) h = std::max(h, classify(st, o));
      return h;
    }

    // One attribute or element: left whole, covered, or looked into when a unit lies inside it.
    void part(const ValueSet& objs, const Lineage& l, int depth) {
      Holds h = strongest(st, objs);
      if (h == Holds::Nothing || h == Holds::Unknown || frozen(st, l) || covered(l, h == Holds::Param)) return;
      if (h == Holds::Param || !touchesInside(units, l)) {
        add("`" + partName(st, l) + "`");
        return;
      }
      bool open = depth < 8 && std::all_of(objs.begin(), objs.end(), [&](ObjId o) {
        return classify(st, o) != Holds::Module || enumerable(st.obj(o));
      });
      if (!open) {
        add("`" + partName(st, l) + "` outside its sharded submodules");
        return;
      }
      for (ObjId o : objs)
        if (classify(st, o) == Holds::Module) partsOf(o, l, depth + 1);
    }

    struct Group {
      std::string edge;
      ValueSet objs;
    };
    static void addTo(std::vector<Group>& groups, const std::string& edge, const ValueSet& vs) {
      for (auto& g : groups)
        if (g.edge == edge) {
          semantic::addValues(g.objs, vs);
          return;
        }
      groups.push_back({edge, vs});
    }
    ValueSet flat(const ValueSet& vs) const {
      ValueSet out;
      st.flatten(vs, out);
      return out;
    }
    static bool sameLineage(const Lineage& a, const Lineage& b) {
      return a.edges.size() == b.edges.size() && within(a, b);
    }

    // The number of elements of `[f() for _ in range(N)]` with N a literal (up to 64), else 0.
    static int rangeCount(TSNode comp, std::string_view src) {
      std::string_view type = ts_node_type(comp);
      if (type != "list_comprehension" && type != "generator_expression") return 0;
      TSNode loop{};
      for (TSNode c : syntax::namedChildren(comp)) {
        std::string_view t = ts_node_type(c);
        if (t == "if_clause" || (t == "for_in_clause" && !ts_node_is_null(loop))) return 0;
        if (t == "for_in_clause") loop = c;
      }
      TSNode call = ts_node_is_null(loop) ? loop : syntax::field(loop, "right");
      if (ts_node_is_null(call) || std::string_view(ts_node_type(call)) != "call" ||
          syntax::textOf(syntax::field(call, "function"), src) != "range")
        return 0;
      syntax::NodeList args = syntax::namedChildren(syntax::field(call, "arguments"));
      if (args.size() != 1 || std::string_view(ts_node_type(args[0])) != "integer") return 0;
      std::string_view digits = syntax::textOf(args[0], src);
      if (digits.empty() || digits.size() > 2 ||
          !std::all_of(digits.begin(), digits.end(), [](char d) { return std::isdigit(static_cast<unsigned char>(d)); }))
        return 0;
      int n = std::stoi(std::string(digits));
      return n <= 64 ? n : 0;
    }

    // The elements of a torch.nn container, by index edge ("[0]", "['k']", or "[*]" for elements
    // whose number is unknown: a comprehension, `append` in a loop). False when they cannot be
    // listed (`nn.Sequential(*layers)`, an argument, `add_module`).
    bool elementsOf(const semantic::Obj& o, const Lineage& l, std::vector<Group>& out) {
      std::string_view q = o.name, kind = lastComponent(q);
      if (o.cls) return false;  // a subclass of a container: its elements come from code not read here
      if (isContainerClass(q)) {
        // Only positional arguments as written: no `*layers`, `**named` or keyword argument.
        TSNode r = trees.root(o.origin.file);
        TSNode call = ts_node_is_null(r) ? r : syntax::nodeSpanning(r, o.origin.range, "call");
        if (ts_node_is_null(call)) return false;
        for (TSNode a : syntax::namedChildren(syntax::field(call, "arguments"))) {
          std::string_view type = ts_node_type(a);
          if (type == "list_splat" || type == "dictionary_splat" || type == "keyword_argument") return false;
        }
        if (o.inputs().empty()) {
          // `nn.ModuleList()`: elements come from `append` (below).
        } else if (kind == "Sequential") {
          for (size_t i = 0; i < o.inputs().size(); ++i) {
            for (ObjId v : o.inputs()[i])
              if (st.obj(v).kind == ObjKind::Container || startsWith(st.obj(v).name, "collections."))
                return false;  // `nn.Sequential(OrderedDict(...))`: named elements
            addTo(out, "[" + std::to_string(i) + "]", o.inputs()[i]);
          }
        } else {
          if (o.inputs().size() != 1 || o.inputs()[0].size() != 1) return false;
          const semantic::Obj& c = st.obj(o.inputs()[0][0]);
          if (c.kind != ObjKind::Container || (kind == "ModuleDict") != (c.containerKind == 'd')) return false;
          TSNode n = trees.at(c.origin.site());
          bool comprehension = !ts_node_is_null(n) && isComprehension(ts_node_type(n));
          int count = comprehension ? rangeCount(n, trees.text(c.origin.file)) : 0;
          for (size_t i = 0; i < c.elements().size(); ++i) {
            for (ObjId v : c.elements()[i])
              if (st.obj(v).kind == ObjKind::Container) return false;
            if (count > 0) {
              // `[Block() for _ in range(4)]`: four elements, each one of the values.
              for (int k = 0; k < count; ++k) addTo(out, "[" + std::to_string(k) + "]", c.elements()[i]);
              continue;
            }
            std::string edge = "[" + std::to_string(i) + "]";
            if (comprehension) edge = "[*]";
            else if (kind == "ModuleDict") {
              if (i >= c.keys().size() || c.keys()[i].empty() || c.keys()[i] == "**") return false;
              edge = "['" + c.keys()[i] + "']";
            }
            addTo(out, edge, c.elements()[i]);
          }
          // A list built before (`blocks = []`, then `blocks.append(Block())` in a loop).
          for (const Event& e : st.events)
            if (e.kind == EventKind::MethodCall && e.target == o.inputs()[0][0] && !e.args.empty() &&
                (e.name == "append" || e.name == "insert" || e.name == "extend"))
              addTo(out, "[*]", flat(e.args.back()));
        }
      }
      // Elements added later: `layers.append(Block())`, `layers["k"] = Block()`.
      for (const Event& e : st.events) {
        if (e.target == kNoObj || (e.kind != EventKind::MethodCall && e.kind != EventKind::SetAttr)) continue;
        bool add = e.kind == EventKind::MethodCall &&
                   (e.name == "append" || e.name == "extend" || e.name == "insert" || e.name == "add_module" ||
                    e.name == "register_module" || e.name == "update");
        bool set = e.kind == EventKind::SetAttr && isIndexEdge(e.name);
        if ((!add && !set) || !sameLineage(lineageOf(st, e.target), l)) continue;
        if (e.kind == EventKind::MethodCall && e.name != "append" && e.name != "insert") return false;
        if (e.args.empty()) return false;
        addTo(out, set ? e.name : "[*]", flat(e.args.back()));
      }
      return true;
    }

    // The parts of module `o` (at `l`): its attributes (own parameters, submodules) and, for a
    // container, its elements.
    void partsOf(ObjId id, const Lineage& l, int depth) {
      const semantic::Obj& o = st.obj(id);
      std::vector<Group> attrs;
      for (size_t i = 0; i < st.objects.size(); ++i)
        if (st.objects[i].owner == id) addTo(attrs, st.objects[i].ownerEdge(), {static_cast<ObjId>(i)});
      for (const auto& g : attrs) {
        Lineage cl = l;
        cl.edges.push_back(g.edge);
        part(g.objs, cl, depth);
      }
      std::vector<Group> elems;
      if (!elementsOf(o, l, elems)) return;  // elements unknown: nothing said about them
      // `fully_shard(layers[i])` once, outside a loop: one element, which one is unknown.
      std::set<const Event*> singles;
      for (const Unit& u : units) {
        const Lineage& t = u.target;
        if (t.edges.size() > l.edges.size() && within(t, l) && t.edges[l.edges.size()] == "[*]" &&
            !iterated(st, trees, u))
          singles.insert(u.event);
      }
      std::vector<std::string> literalLeft;
      bool othersLeft = false;
      // When every element has its index, `layers[-1]` is the last one.
      bool counted = std::all_of(elems.begin(), elems.end(), [](const Group& g) {
        return g.edge != "[*]" && g.edge.size() > 2 && std::isdigit(static_cast<unsigned char>(g.edge[1]));
      });
      for (size_t gi = 0; gi < elems.size(); ++gi) {
        const Group& g = elems[gi];
        // The element's lineage as the code may spell it: by index or key, by negative index, and a
        // ModuleDict key that is an identifier as an attribute (`transformer.wte`).
        std::vector<Lineage> forms;
        auto form = [&](const std::string& edge) {
          Lineage f = l;
          f.edges.push_back(edge);
          forms.push_back(std::move(f));
        };
        std::string key = g.edge.size() > 4 && g.edge[1] == '\'' ? g.edge.substr(2, g.edge.size() - 4) : "";
        bool identifier = !key.empty() && !std::isdigit(static_cast<unsigned char>(key[0])) &&
                          std::all_of(key.begin(), key.end(), [](char ch) {
                            return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
                          });
        if (identifier) form("." + key);
        form(g.edge);
        if (counted) form("[" + std::to_string(static_cast<long>(gi) - static_cast<long>(elems.size())) + "]");
        auto reaches = [&](const Unit& u, const Lineage& f, bool strictly) {
          return u.target.edges.size() >= f.edges.size() + (strictly ? 1 : 0) && within(u.target, f);
        };
        // The form the units use, to look inside the element.
        Lineage gl = forms.front();
        for (const auto& f : forms)
          if (std::any_of(units.begin(), units.end(), [&](const Unit& u) { return reaches(u, f, false); })) {
            gl = f;
            break;
          }
        Holds h = strongest(st, g.objs);
        if (h != Holds::Module || frozen(st, gl) ||
            std::any_of(forms.begin(), forms.end(), [&](const Lineage& f) { return covered(f, false); }))
          continue;
        bool touched = std::any_of(units.begin(), units.end(), [&](const Unit& u) { return reaches(u, gl, false); });
        if (g.edge == "[*]") {
          // Elements of unknown number: left when no unit touches them, looked into when only
          // passes over every element do, unknown otherwise.
          bool allIterated = std::all_of(units.begin(), units.end(), [&](const Unit& u) {
            return !(u.target.edges.size() >= gl.edges.size() && within(u.target, gl)) || iterated(st, trees, u);
          });
          if (!touched) othersLeft = true;
          else if (allIterated) part(g.objs, gl, depth);
          continue;
        }
        bool inside = std::any_of(units.begin(), units.end(), [&](const Unit& u) { return reaches(u, gl, true); });
        if (inside) part(g.objs, gl, depth);
        else if (singles.empty()) add("`" + partName(st, gl) + "`");
        else literalLeft.push_back(partName(st, gl));
      }
      if (literalLeft.size() > singles.size()) add("the unsharded elements of `" + partName(st, l) + "`");
      if (othersLeft) add("the other elements of `" + partName(st, l) + "`");
    }
  };

  struct Coverage {
    bool known = false;              // the module's structure is known, so its parts are
    std::vector<std::string> left;   // parts holding parameters outside every unit
  };

  // What of `module` stays outside the units when its structure is known: its own parameters
  // (`self.scale = nn.Parameter(...)`) and every part that can hold parameters (a module, or an
  // object of an unknown class) that no unit covers. Plain objects (a SimpleNamespace, a
  // dataclass, a tensor) hold none; attributes of unknown kind (an argument stored as an
  // attribute) are not counted either way; a part with a unit inside it is looked into.
  static Coverage coverage(const Store& st, Trees& trees, const Lineage& module, const std::vector<Unit>& units) {
    Coverage c;
    ObjId m = objectAt(st, module);
    if (m == kNoObj || !enumerable(st.obj(m))) return c;
    c.known = true;
    Walk walk{st, trees, units, module.edges.size(), {}};
    walk.partsOf(m, module, 0);
    c.left = std::move(walk.left);
    return c;
  }

  // The module part of a lineage, for messages: `model.layer1.modules()[*]` -> `model.layer1`.
  static std::string readable(const Store& st, Lineage l) {
    for (size_t i = 0; i < l.edges.size(); ++i)
      if (std::string_view e = edgeName(l.edges[i]); e.size() > 2 && e.compare(e.size() - 2, 2, "()") == 0) {
        l.edges.resize(i);
        break;
      }
    return render(st, l);
  }

  // Gradients of something inside `module` explicitly all-reduced (best effort).
  static bool allReduced(const Store& st, const Lineage& module) {
    for (const Event& e : st.events) {
      if (e.kind != EventKind::Call || e.name.size() < 10 || e.name.compare(e.name.size() - 10, 10, "all_reduce") != 0)
        continue;
      for (ObjId a : e.allArgs())
        if (within(lineageOf(st, a), module)) return true;
    }
    return false;
  }

  // A freeze of something inside `module` that is not inside one of the sharded units.
  static bool frozenOutside(const Store& st, const Lineage& module, const std::vector<Lineage>& units) {
    for (const Event& e : st.events) {
      bool freeze = (e.kind == EventKind::MethodCall && e.name == "requires_grad_") ||
                    (e.kind == EventKind::SetAttr && e.name == "requires_grad");
      if (!freeze || e.target == kNoObj) continue;
      Lineage t = lineageOf(st, e.target);
      if (!within(t, module) && !within(module, moduleOfSource(t))) continue;
      if (!frozen(st, t)) continue;
      bool insideUnit = std::any_of(units.begin(), units.end(), [&](const Lineage& u) { return within(t, u); });
      if (!insideUnit) return true;
    }
    return false;
  }

  // The fix: `fully_shard(<root>)` on a line of its own after the statement that shards the last
  // block (the loop around it, when there is one), at that statement's indentation, with the
  // blocks' mesh and policies. Only where that is plainly
  // possible: the call and the optimizer in the linted file and in one function, the optimizer
  // built after that statement, the root a plain name or attribute path. Unsafe: sharding the root
  // changes what the step computes (the gradients of those parameters are then reduced).
  std::optional<Fix> rootFix(RuleContext& cx, const Event& lastWrap, const semantic::Obj& optimizer, const std::string& root) {
    uint32_t fileId = cx.analysis().module().fileId();
    semantic::Site call = lastWrap.origin.site(), built = optimizer.origin.site();
    if (call.file != fileId || built.file != fileId) return std::nullopt;
    for (char c : root)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') return std::nullopt;
    if (root.empty() || std::isdigit(static_cast<unsigned char>(root[0]))) return std::nullopt;
    const std::string& text = cx.file().text;
    TSNode callNode = syntax::nodeSpanning(cx.root(), call.range, "call");
    if (ts_node_is_null(callNode)) return std::nullopt;
    // The statement to follow: the outermost loop around the call within its function, else the
    // call's own statement.
    TSNode stmt = syntax::followingPoint(callNode);
    if (ts_node_is_null(stmt)) return std::nullopt;
    if (cx.enclosingFunction(call) != cx.enclosingFunction(built) || built.range.begin < ts_node_end_byte(stmt))
      return std::nullopt;
    uint32_t start = ts_node_start_byte(stmt);
    size_t lineStart = text.rfind('\n', start == 0 ? 0 : start - 1);
    lineStart = lineStart == std::string::npos || start == 0 ? 0 : lineStart + 1;
    std::string indent = text.substr(lineStart, start - lineStart);
    if (indent.find_first_not_of(" \t") != std::string::npos) return std::nullopt;  // `x = 1; for ...`
    std::string line = std::string(syntax::textOf(syntax::field(callNode, "function"), text)) + "(" + root;
    // The arguments every unit must share (one mesh, one mixed-precision and offload policy); not
    // the per-block ones (`reshard_after_forward`, often computed in the loop).
    for (const auto& kw : syntax::keywordArguments(callNode)) {
      std::string_view name = syntax::textOf(kw.name, text);
      if (name == "mesh" || name == "mp_policy" || name == "offload_policy")
        line += ", " + std::string(name) + "=" + std::string(syntax::textOf(kw.value, text));
    }
    line += ")";
    // After the end of the statement's last line (a trailing comment stays where it is).
    size_t nl = text.find('\n', ts_node_end_byte(stmt));
    uint32_t at = static_cast<uint32_t>(nl == std::string::npos ? text.size() : nl + 1);
    std::string insert = (nl == std::string::npos ? "\n" : "") + indent + line + "\n";
    return Fix{"Add `" + line + "` after the blocks are sharded", Applicability::Unsafe,
               {cx.edit(semantic::Site{fileId, ByteRange{at, at}}, insert)}};
  }

  // `replicate(m)` (composable) or `DistributedDataParallel(m)`: m's parameters that no
  // fully_shard unit takes are replicated, their gradients all-reduced.
  static bool isReplication(std::string_view q) {
    std::string_view last = lastComponent(q);
    return (startsWith(q, "torch.distributed.") && last == "replicate") ||
           (startsWith(q, "torch.") && last == "DistributedDataParallel");
  }

  // The comprehension containers among `arg` (containers and param-group dicts looked into) that
  // hold `source` and are filtered (`[p for p in m.parameters() if p.requires_grad]`).
  static void filteredComprehensions(const Store& st, Trees& trees, const ValueSet& arg, ObjId source,
                                     std::vector<const semantic::Obj*>& out, int depth = 0) {
    if (depth > 16) return;
    for (ObjId id : arg) {
      const semantic::Obj& c = st.obj(id);
      if (c.kind != ObjKind::Container) continue;
      ValueSet held;
      st.flatten({id}, held);
      if (std::find(held.begin(), held.end(), source) == held.end()) continue;
      TSNode n = trees.at(c.origin.site());
      if (!ts_node_is_null(n) && isComprehension(ts_node_type(n)) && !ifClauses(n).empty()) {
        if (std::find(out.begin(), out.end(), &c) == out.end()) out.push_back(&c);
        continue;
      }
      for (const auto& e : c.elements()) filteredComprehensions(st, trees, e, source, out, depth + 1);
    }
  }

  static std::string textAt(Trees& trees, const semantic::Origin& o) {
    std::string_view text = trees.text(o.file);
    if (o.range.begin > o.range.end || o.range.end > text.size()) return "";
    return oneLine(text.substr(o.range.begin, o.range.end - o.range.begin));
  }

  // The expression passed as `ignored_*` to the wrap call, as written, when it is more than a
  // module or its parameters: a filtered comprehension or a slice of a container's children.
  static std::string ignoredAsWritten(const Store& st, Trees& trees, const Event& w, ObjId ig) {
    TSNode r = trees.root(w.origin.file);
    TSNode call = ts_node_is_null(r) ? r : syntax::nodeSpanning(r, w.origin.range, "call");
    if (!ts_node_is_null(call)) {
      std::string_view src = trees.text(w.origin.file);
      for (const auto& kw : syntax::keywordArguments(call)) {
        std::string_view name = syntax::textOf(kw.name, src);
        if (name != "ignored_params" && name != "ignored_modules" && name != "ignored_states") continue;
        bool filtered = isComprehension(ts_node_type(kw.value)) && !ifClauses(kw.value).empty();
        if (filtered || containsType(kw.value, "slice")) return oneLine(syntax::textOf(kw.value, src));
      }
    }
    // Bound to a name first: the comprehension it holds.
    for (const Event& e : st.events) {
      if (e.kind != EventKind::Call || e.origin.file != w.origin.file || e.origin.range.begin != w.origin.range.begin ||
          e.origin.range.end != w.origin.range.end)
        continue;
      for (const auto& [k, v] : e.kwargs)
        if (k == "ignored_params" || k == "ignored_modules" || k == "ignored_states") {
          std::vector<const semantic::Obj*> found;
          filteredComprehensions(st, trees, v, ig, found);
          if (!found.empty()) return textAt(trees, found.front()->origin);
        }
    }
    return "";
  }

  void check(RuleContext& cx, Trees& trees, const Store& st) {
    auto wraps = domainEvents(st, "wrap");
    if (wraps.empty()) return;
    // Every wrap that is not a re-shard of a sharded model, and every replication.
    std::vector<Unit> units;
    for (const Event* w : wraps)
      if (w->target != kNoObj && alreadyShardedBy(st, *w).root == kNoObj)
        units.push_back({w, lineageOf(st, w->target), false, {}});
    for (const Event& e : st.events) {
      if (e.kind != EventKind::Call || !isReplication(e.name) || expectedToFail(st, e.point) ||
          neverRuns(st, e.point))
        continue;
      if (const ValueSet* mod = e.arg(0, "module"))
        for (ObjId m : *mod) units.push_back({&e, lineageOf(st, m), true, {}});
    }
    std::set<std::pair<ObjId, std::string>> done;
    for (ObjId opt : optimizers(st)) {
      const auto& o = st.obj(opt);
      if (o.inputs().empty()) continue;
      for (ObjId s : paramSources(st, o.inputs()[0])) {
        Lineage src = lineageOf(st, s);
        // (a) blocks sharded, root never.
        if (isWholeParams(src)) checkBlocks(cx, st, trees, wraps, units, o, s, src, done);
        // (b) ignored_params / ignored_modules / ignored_states holding trainable optimized parameters.
        checkIgnored(cx, st, trees, wraps, units, o, src, done);
      }
    }
  }

  void checkBlocks(RuleContext& cx, const Store& st, Trees& trees, const std::vector<const Event*>& wraps,
                   const std::vector<Unit>& units, const semantic::Obj& o, ObjId s, const Lineage& src,
                   std::set<std::pair<ObjId, std::string>>& done) {
    Lineage module = moduleOfSource(src);
    bool covered = false;
    std::vector<const Event*> below;
    std::vector<Lineage> subUnits;
    for (const Event* w : wraps) {
      if (w->target == kNoObj) continue;
      // Re-sharding part of a model known to be sharded already: its root is covered.
      Lineage sharded = alreadyShardedBy(st, *w);
      if (sharded.root != kNoObj) {
        if (within(module, sharded)) covered = true;
        continue;
      }
      Lineage t = lineageOf(st, w->target);
      if (t.edges.size() > module.edges.size() || !within(module, t)) {
        if (within(t, module) && w->attr("api") == "fully_shard") {
          below.push_back(w);
          subUnits.push_back(t);
        }
      }
    }
    // A unit (a wrap or a replication) over the module or an ancestor, or a pass over all its
    // children, covers it.
    for (const Unit& u : units)
      if (covers(st, trees, u, module, module.edges.size())) covered = true;
    // A sharded sub-root that itself contains sharded blocks (Lightning's
    // `fully_shard(self.model)` after its blocks, inside a LightningModule):
    // what lies outside it is unknown, so stay silent (precision first).
    for (size_t i = 0; i < subUnits.size() && !covered; ++i)
      for (size_t j = 0; j < subUnits.size() && !covered; ++j)
        if (i != j && within(subUnits[j], subUnits[i]) && subUnits[j].edges.size() > subUnits[i].edges.size())
          covered = true;
    if (covered || below.empty()) return;
    std::string key = render(st, module);
    Coverage parts = coverage(st, trees, module, units);
    if (parts.known && parts.left.empty()) return;  // every part is in some unit, or holds no parameter
    if (frozenOutside(st, module, subUnits) || allReduced(st, module) || !done.insert({module.root, key}).second)
      return;
    const Event* first = *std::min_element(below.begin(), below.end(), [&](const Event* a, const Event* b) {
      return st.points[static_cast<size_t>(a->point)].ordinal < st.points[static_cast<size_t>(b->point)].ordinal;
    });
    std::string outside = "the parameters outside the sharded blocks (embeddings, final norm, head)";
    if (parts.known) {
      outside = "the parameters of ";
      for (size_t i = 0; i < parts.left.size(); ++i) outside += (i ? ", " : "") + parts.left[i];
    }
    // The optimizer's parameters as written when comprehensions filter them (a filter does not
    // change the finding: `requires_grad` drops only frozen parameters, which are not counted,
    // and a split such as `p.ndim >= 2` / `p.ndim < 2` over two groups keeps them all).
    std::vector<const semantic::Obj*> filters;
    filteredComprehensions(st, trees, o.inputs()[0], s, filters);
    std::string held;
    for (size_t i = 0; i < filters.size(); ++i)
      held += (i ? " and `" : "`") + textAt(trees, filters[i]->origin) + "`";
    std::string holds = held.empty() ? "all of its parameters" : held;
    std::string msg = "`fully_shard` is applied to submodules of `" + key + "` but never to `" + key +
                      "` itself, while the optimizer holds " + holds + "; " + outside +
                      " stay plain replicated tensors whose gradients are never reduced, so ranks silently "
                      "diverge; call `fully_shard(" + key + ")` after sharding the blocks";
    if (std::string when = onlyWhen(st, {first->point, o.point}); !when.empty())
      msg += " (this holds " + when + ")";
    std::vector<Note> notes;
    semantic::Site primary = first->origin.primaryIn(o.origin);
    if (primary != first->origin.site())
      notes.push_back(cx.note(first->origin.site(), "`fully_shard` is applied to a submodule here"));
    notes.push_back(cx.note(o.origin.primaryIn(first->origin),
                            held.empty() ? "the optimizer takes all parameters of `" + key + "` here"
                                         : "the optimizer takes " + held + " here"));
    const Event* last = *std::max_element(below.begin(), below.end(), [&](const Event* a, const Event* b) {
      return st.points[static_cast<size_t>(a->point)].ordinal < st.points[static_cast<size_t>(b->point)].ordinal;
    });
    cx.report(info(), primary, std::move(msg), std::move(notes), rootFix(cx, *last, o, key));
  }

  void checkIgnored(RuleContext& cx, const Store& st, Trees& trees, const std::vector<const Event*>& wraps,
                    const std::vector<Unit>& units, const semantic::Obj& o, const Lineage& src,
                    std::set<std::pair<ObjId, std::string>>& done) {
    for (const Event* w : wraps) {
      if (w->attr("ignored") != "1" || w->args.empty() || w->target == kNoObj) continue;
      Lineage t = lineageOf(st, w->target);
      for (ObjId ig : w->args[0]) {
        Lineage il = lineageOf(st, ig);
        bool overlaps = within(src, il) || within(il, moduleOfSource(src)) || within(il, src);
        if (!overlaps || frozen(st, il)) continue;
        // Ignored parameters outside the wrapped module belong to no part of this wrap; those
        // another unit inside it takes are in that unit.
        Lineage im = isWholeParams(il) ? moduleOfSource(il) : il;
        if (!within(im, t)) continue;
        bool otherUnit = std::any_of(units.begin(), units.end(), [&](const Unit& u) {
          return u.event != w && !u.replica && u.target.edges.size() > t.edges.size() && within(u.target, t) &&
                 within(im, u.target);
        });
        if (otherUnit) continue;
        // One finding per wrap call, whatever it ignores.
        if (!done.insert({kNoObj, "ignored@" + std::to_string(w->origin.file) + ":" +
                                      std::to_string(w->origin.range.begin)})
                 .second)
          continue;
        std::string name = ignoredAsWritten(st, trees, *w, ig);
        if (name.empty()) name = readable(st, il);
        std::string msg = "parameters under `" + name +
                          "` are excluded from FSDP (`ignored_*`) but are trainable and held by the optimizer; "
                          "ignored parameters are not sharded and their gradients are never reduced, so ranks "
                          "silently diverge; freeze them, keep them out of the optimizer, or stop ignoring them";
        if (std::string when = onlyWhen(st, {w->point, o.point}); !when.empty())
          msg += " (this wrap runs " + when + ")";
        std::vector<Note> notes;
        semantic::Site primary = w->origin.primaryIn(o.origin);
        if (primary != w->origin.site()) notes.push_back(cx.note(w->origin.site(), "the wrap that ignores them"));
        notes.push_back(cx.note(o.origin.primaryIn(w->origin), "the optimizer that holds them is built here"));
        cx.report(info(), primary, std::move(msg), std::move(notes));
      }
    }
  }

  const RuleInfo* info_;
};

}  // namespace

std::unique_ptr<Rule> makeSL103(const RuleInfo* info) { return std::make_unique<UnshardedParams>(info); }

}  // namespace shardlint::rules
