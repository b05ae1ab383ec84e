// Unit tests for the engine: line index, UTF-8, node kinds, import resolution,
// event-order queries and function summaries.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>
#include <thread>

#include "Registry.h"
#include "core/SourceFile.h"
#include "core/WordSet.h"
#include "syntax/CodeWords.h"
#include "driver/Linter.h"
#include "driver/LinterImpl.h"
#include "driver/Project.h"
#include "semantic/Interpreter.h"
#include "syntax/TreeSitter.h"

using namespace shardlint;
using namespace shardlint::semantic;

namespace {

// An engine-only call model: knows nothing about any library.
struct NoModel final : CallModel {
  bool onCall(CallSite&) override { return false; }
};

struct Analysed {
  std::unique_ptr<SourceFile> file;
  syntax::Tree tree;
  std::unique_ptr<CallModel> model;
  std::unique_ptr<Module> module;
  std::unique_ptr<Session> session;
  std::unique_ptr<FileAnalysis> analysis;
  const Store& store() const { return analysis->moduleStore(); }
  // The first event of `kind` whose name is `name`.
  const Event* event(std::string_view name, EventKind kind = EventKind::Call, int nth = 0) const {
    for (const Event& e : store().events)
      if (e.kind == kind && e.name == name && nth-- == 0) return &e;
    return nullptr;
  }
};

Analysed analyse(const std::string& src, bool fsdp = false, std::string module = "t", bool isPackage = false) {
  Analysed a;
  a.file = std::make_unique<SourceFile>("t.py", src);
  static thread_local syntax::Parser parser;
  a.tree = parser.parse(a.file->text);
  if (fsdp) a.model = rules::catalog().makeCallModel();
  else a.model = std::make_unique<NoModel>();
  a.module = std::make_unique<Module>(*a.file, a.tree.root(), module, 0, isPackage);
  a.session = std::make_unique<Session>(*a.model);
  a.analysis = std::make_unique<FileAnalysis>(*a.module, *a.session);
  a.analysis->run();
  return a;
}

// The summary of the function `qualname` of `a`'s module (computed on first use).
const Summary* summaryIn(Analysed& a, std::string_view qualname) {
  const FunctionDef* def = a.analysis->findFunction(qualname);
  REQUIRE(def);
  const Summary* s = a.session->summary(def);
  REQUIRE(s);
  return s;
}

bool mayBefore(const Analysed& a, std::string_view x, std::string_view y) {
  const Event* ex = a.event(x);
  const Event* ey = a.event(y);
  REQUIRE(ex);
  REQUIRE(ey);
  return a.store().mayHappenBefore(ex->point, ey->point);
}

bool dominates(const Analysed& a, std::string_view x, std::string_view y) {
  const Event* ex = a.event(x);
  const Event* ey = a.event(y);
  REQUIRE(ex);
  REQUIRE(ey);
  return a.store().dominates(ex->point, ey->point);
}

}  // namespace

TEST_CASE("line index: lines, code points and UTF-16 columns", "[unit][source]") {
  std::string text = "ab\n\xC3\xA9x\n\xF0\x9F\x99\x82y\r\nlast";  // "ab", "éx", "🙂y\r", "last"
  LineIndex idx(text);
  CHECK(idx.lineCount() == 4);
  CHECK(idx.lineOf(0) == 0);
  CHECK(idx.lineOf(2) == 0);  // the newline belongs to its line
  CHECK(idx.lineOf(3) == 1);
  auto x = idx.resolve(5);  // 'x' after 'é' (2 bytes)
  CHECK(x.line == 1);
  CHECK(x.byteColumn == 2);
  CHECK(x.codepointColumn == 1);
  CHECK(x.utf16Column == 1);
  auto y = idx.resolve(11);  // 'y' after an emoji (4 bytes, 2 UTF-16 units)
  CHECK(y.line == 2);
  CHECK(y.byteColumn == 4);
  CHECK(y.codepointColumn == 1);
  CHECK(y.utf16Column == 2);
  CHECK(idx.lineEnd(2) == 12);  // excludes "\r\n"
  CHECK(idx.offsetOfUtf16(2, 2) == 11);
  CHECK(idx.offsetOfUtf16(2, 99) == 12);  // clamps to the line end
  CHECK(idx.resolve(static_cast<uint32_t>(text.size())).line == 3);
  // A text without "\r" (its lines found with memchr): an empty line and a last line break.
  LineIndex plain("ab\ncd\n\nlast\n");
  CHECK(plain.lineCount() == 5);
  CHECK(plain.lineStart(1) == 3);
  CHECK(plain.lineStart(2) == 6);
  CHECK(plain.lineStart(3) == 7);
  CHECK(plain.lineStart(4) == 12);
  CHECK(plain.lineEnd(3) == 11);
  CHECK(LineIndex("").lineCount() == 1);
  CHECK(LineIndex("\n").lineCount() == 2);
}

TEST_CASE("UTF-8 validation", "[unit][source]") {
  CHECK(isValidUtf8("plain ascii"));
  CHECK(isValidUtf8("\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x99\x82"));
  CHECK_FALSE(isValidUtf8("\xE9t\xE9"));          // Latin-1
  CHECK_FALSE(isValidUtf8("\xC0\xAF"));           // overlong
  CHECK_FALSE(isValidUtf8("\xED\xA0\x80"));       // surrogate
  CHECK_FALSE(isValidUtf8("\xF0\x9F\x99"));       // truncated
  CHECK_FALSE(isValidUtf8("\xF4\x90\x80\x80"));   // above U+10FFFF
  // Past and across the eight-byte ASCII steps.
  CHECK(isValidUtf8("abcdefg\xC3\xA9hijklmnopqrstuvwxyz"));
  CHECK(isValidUtf8("abcdefghijklmnop\xF0\x9F\x99\x82"));
  CHECK_FALSE(isValidUtf8("abcdefghijklmnop\xE9"));
  CHECK_FALSE(isValidUtf8("abcdefgh\xC3"));
  CHECK_FALSE(isValidUtf8("abcdefghijklmnopqrstuvw\x80xyz"));
}

TEST_CASE("node kinds are resolved once and checked against the grammar", "[unit][syntax]") {
  const auto& kinds = syntax::PyKinds::instance();
  syntax::Parser parser;
  std::string src = "x = f(1)\n";
  auto tree = parser.parse(src);
  REQUIRE(tree);
  TSNode stmt = ts_node_named_child(tree.root(), 0);
  CHECK(kinds.kind(tree.root()) == syntax::Kind::module);
  CHECK(kinds.kind(stmt) == syntax::Kind::expression_statement);
  CHECK(kinds.kind(ts_node_named_child(stmt, 0)) == syntax::Kind::assignment);
  CHECK(syntax::PyKinds::name(syntax::Kind::call) == "call");
  auto bad = parser.parse("def f(:\n");
  CHECK(syntax::firstSyntaxError(bad.root()).has_value());
  CHECK_FALSE(syntax::firstSyntaxError(tree.root()).has_value());
}

TEST_CASE("calls found by their callee names are the ones a walk of the tree meets in its order", "[unit][syntax]") {
  const auto& kinds = syntax::PyKinds::instance();
  syntax::Parser parser;
  std::string src =
      "import transformers as t\n"
      "a = TrainingArguments(fsdp_config=dict(x=Plugin()))  # TrainingArguments(...) in a comment\n"
      "b = t.TrainingArguments(output_dir='TrainingArguments(')\n"
      "c = obj.attr.Plugin(Plugin(1))(2)\n"
      "d = TrainingArgumentsX() + XTrainingArguments() + (TrainingArguments)() + TrainingArguments\n"
      "e = make()[0].Plugin(k=TrainingArguments(x=1).Plugin)\n"
      "def Plugin(TrainingArguments): return TrainingArguments.Plugin(\n"
      "  t . TrainingArguments  (1))\n"
      "f = Plugin(\n";  // a syntax error at the end
  auto tree = parser.parse(src);
  REQUIRE(tree);
  std::unordered_set<std::string_view> names{"TrainingArguments", "Plugin", "Missing"};
  std::vector<std::pair<uint32_t, uint32_t>> walked, found;
  syntax::walk(tree.root(), [&](TSNode n) {
    if (kinds.kind(n) == syntax::Kind::call && names.count(syntax::calleeLastName(n, src)))
      walked.emplace_back(ts_node_start_byte(n), ts_node_end_byte(n));
    return true;
  });
  for (TSNode n : syntax::callsNamed(tree.root(), src, names))
    found.emplace_back(ts_node_start_byte(n), ts_node_end_byte(n));
  CHECK(walked.size() >= 8);
  CHECK(found == walked);
  CHECK(syntax::callsNamed(tree.root(), src, {}).empty());
}

TEST_CASE("field and child look-ups agree with the tree-sitter runtime's own", "[unit][syntax]") {
  const auto& kinds = syntax::PyKinds::instance();
  const TSLanguage* lang = kinds.language();
  for (TSFieldId f = 1; f <= ts_language_field_count(lang); ++f) {
    std::string name = ts_language_field_name_for_id(lang, f);
    CHECK(kinds.field(name) == f);
  }
  CHECK(kinds.field("no_such_field") == 0);
  CHECK(kinds.field("") == 0);

  syntax::Parser parser;
  // The call's twelve arguments and the else block's ten statements pass namedChildren's eight kept in place.
  std::string src = "if a:\n  x = f(1, k=2)  # c\nelif b:\n  pass\nelif c:\n  y = [i for i in z]\nelse:\n  del q\n"
                    "  g(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, k=12)\n  a = 1\n  b = 2\n  c = 3\n  d = 4\n  e = 5\n  f = 6\n"
                    "  g = 7\n  h = 8\n";
  auto tree = parser.parse(src);
  REQUIRE(tree);
  // Every node: namedChildren and fieldChildren list what index-based access lists.
  size_t longest = 0;
  syntax::walk(tree.root(), [&](TSNode n) {
    syntax::NodeList named = syntax::namedChildren(n);
    REQUIRE(named.size() == ts_node_named_child_count(n));
    syntax::NodeList copy = named;  // a copy lists the same nodes, kept in place or on the heap
    uint32_t i = 0;
    for (TSNode c : copy) CHECK(ts_node_eq(c, ts_node_named_child(n, i++)));
    CHECK(i == named.size());
    for (i = 0; i < named.size(); ++i) CHECK(ts_node_eq(named[i], ts_node_named_child(n, i)));
    if (!named.empty()) CHECK(ts_node_eq(named.back(), *named.rbegin()));
    longest = std::max(longest, named.size());
    for (TSFieldId f = 1; f <= ts_language_field_count(lang); ++f) {
      const char* name = ts_language_field_name_for_id(lang, f);
      std::vector<TSNode> expected;
      for (uint32_t i = 0; i < ts_node_child_count(n); ++i)
        if (const char* fn = ts_node_field_name_for_child(n, i); fn && std::string_view(fn) == name)
          expected.push_back(ts_node_child(n, i));
      std::vector<TSNode> got = syntax::fieldChildren(n, name);
      REQUIRE(got.size() == expected.size());
      for (size_t i = 0; i < got.size(); ++i) CHECK(ts_node_eq(got[i], expected[i]));
      CHECK(ts_node_eq(syntax::field(n, name), ts_node_child_by_field_name(n, name, static_cast<uint32_t>(strlen(name)))));
    }
    return true;
  });
  CHECK(syntax::fieldChildren(ts_node_named_child(tree.root(), 0), "alternative").size() == 3);
  CHECK(longest == 12);
}

TEST_CASE("imports resolve to qualified names", "[unit][imports]") {
  auto a = analyse(
      "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
      "import torch.distributed.fsdp as F\n"
      "from torch.distributed._composable.fsdp import fully_shard\n"
      "import torch\n"
      "from torch import optim\n"
      "from .local import helper\n"
      "FSDP(m)\nF.fully_shard(m)\nfully_shard(m)\ntorch.optim.AdamW(p)\noptim.SGD(p)\nhelper(m)\n"
      "def f():\n    import bitsandbytes as bnb\n    bnb.optim.AdamW8bit(p)\nf()\n");
  CHECK(a.event("torch.distributed.fsdp.FullyShardedDataParallel"));
  CHECK(a.event("torch.distributed.fsdp.fully_shard"));
  CHECK(a.event("torch.distributed._composable.fsdp.fully_shard"));
  CHECK(a.event("torch.optim.AdamW"));
  CHECK(a.event("torch.optim.SGD"));
  CHECK(a.event("local.helper"));  // a sibling of top-level module `t`
  CHECK(a.event("bitsandbytes.optim.AdamW8bit"));  // a function-local import
  const auto& imports = a.module->imports();
  CHECK(imports.at("FSDP") == "torch.distributed.fsdp.FullyShardedDataParallel");
  CHECK(imports.at("F") == "torch.distributed.fsdp");
}

TEST_CASE("relative imports resolve against the module's package", "[unit][imports]") {
  auto a = analyse("from . import optim as o\nfrom .parallel import shard\nfrom ..common.utils import log\n", false,
                   "pkg.sub.train");
  CHECK(*a.module->importOf("o") == "pkg.sub.optim");
  CHECK(*a.module->importOf("shard") == "pkg.sub.parallel.shard");
  CHECK(*a.module->importOf("log") == "pkg.common.utils.log");
  auto init = analyse("from .optim import make_optimizer\n", false, "mypkg", /*isPackage=*/true);
  CHECK(*init.module->importOf("make_optimizer") == "mypkg.optim.make_optimizer");
}

TEST_CASE("event order: sequence, branches, loops, try, match, early return", "[unit][order]") {
  SECTION("sequence") {
    auto a = analyse("a()\nb()\n");
    CHECK(mayBefore(a, "a", "b"));
    CHECK(dominates(a, "a", "b"));
    CHECK_FALSE(mayBefore(a, "b", "a"));
  }
  SECTION("if/else arms are exclusive") {
    auto a = analyse("if x:\n    a()\nelif y:\n    c()\nelse:\n    b()\nd()\n");
    CHECK_FALSE(mayBefore(a, "a", "b"));
    CHECK_FALSE(mayBefore(a, "b", "a"));
    CHECK_FALSE(mayBefore(a, "a", "c"));
    CHECK(mayBefore(a, "a", "d"));
    CHECK_FALSE(dominates(a, "a", "d"));
  }
  SECTION("loops: a later statement may run before an earlier one") {
    auto a = analyse("for i in xs:\n    b()\n    a()\nc()\n");
    CHECK(mayBefore(a, "a", "b"));
    CHECK_FALSE(dominates(a, "a", "b"));
    CHECK(mayBefore(a, "a", "c"));
    CHECK_FALSE(dominates(a, "a", "c"));
    auto w = analyse("while cond():\n    if x:\n        a()\n    else:\n        b()\n");
    CHECK(mayBefore(w, "a", "b"));  // next iteration
  }
  SECTION("try: the body may stop part-way; handlers and else are exclusive") {
    auto a = analyse("try:\n    a()\nexcept E:\n    b()\nelse:\n    c()\nfinally:\n    d()\n");
    CHECK(mayBefore(a, "a", "b"));
    CHECK_FALSE(mayBefore(a, "b", "c"));
    CHECK(mayBefore(a, "b", "d"));
    CHECK(mayBefore(a, "c", "d"));
    CHECK_FALSE(dominates(a, "a", "d"));
  }
  SECTION("with bodies are unconditional") {
    auto a = analyse("with ctx() as c:\n    a()\nb()\n");
    CHECK(dominates(a, "a", "b"));
  }
  SECTION("match cases are exclusive") {
    auto a = analyse("match x:\n    case 1:\n        a()\n    case _:\n        b()\nc()\n");
    CHECK_FALSE(mayBefore(a, "a", "b"));
    CHECK(mayBefore(a, "a", "c"));
  }
  SECTION("an arm that returns never reaches what follows") {
    auto a = analyse("def f():\n    if x:\n        a()\n        return\n    b()\nf()\n");
    CHECK_FALSE(mayBefore(a, "a", "b"));
    auto r = analyse("def f():\n    if x:\n        a()\n        raise E\n    b()\nf()\n");
    CHECK_FALSE(mayBefore(r, "a", "b"));
  }
}

TEST_CASE("bindings: aliases, rebinding, unpacking, containment", "[unit][bindings]") {
  auto a = analyse(
      "model = Net()\nnet = model\nuse(net)\nmodel = Wrap(model)\nuse2(model)\n"
      "x, y = model, net\nuse3(y)\nfor layer in net.layers:\n    use4(layer)\n");
  const Store& st = a.store();
  ObjId net = a.event("use")->args[0].at(0);
  CHECK(st.obj(net).name == "Net");  // the alias is the same object
  CHECK(st.obj(a.event("use2")->args[0].at(0)).name == "Wrap");  // rebinding
  CHECK(a.event("use3")->args[0] == a.event("use")->args[0]);    // tuple unpacking
  ObjId layer = a.event("use4")->args[0].at(0);
  CHECK(st.derivesFrom(layer, net));  // a loop over model.layers yields submodules
  CHECK(st.describe(layer) == "model.layers[*]");
}

// The names of the objects a call's first argument may be, sorted ("A,B").
std::string argNames(const Analysed& a, std::string_view call) {
  const Event* e = a.event(call);
  REQUIRE(e);
  REQUIRE_FALSE(e->args.empty());
  std::vector<std::string> names;
  for (ObjId id : e->args[0]) names.push_back(a.store().obj(id).name);
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

TEST_CASE("bindings across branches: every arm starts from the same environment, joins take the union",
          "[unit][bindings]") {
  SECTION("if: an arm that rebinds, and the way around it") {
    CHECK(argNames(analyse("m = A()\nif c:\n    m = B()\nuse(m)\n"), "use") == "A,B");
    CHECK(argNames(analyse("m = A()\nif c:\n    m = B()\nelse:\n    m = C()\nuse(m)\n"), "use") == "B,C");
    CHECK(argNames(analyse("if c:\n    m = A()\nuse(m)\n"), "use") == "A");
  }
  SECTION("a later arm does not see an earlier arm's bindings") {
    auto a = analyse("m = A()\nif c:\n    m = B()\nelif d:\n    seen(m)\n    m = C()\nelse:\n    other(m)\nuse(m)\n");
    CHECK(argNames(a, "seen") == "A");
    CHECK(argNames(a, "other") == "A");
    CHECK(argNames(a, "use") == "A,B,C");
  }
  SECTION("nested arms join inside the arm first") {
    auto a = analyse("m = A()\nif c:\n    if d:\n        m = B()\n    inner(m)\n    m2 = m\nelse:\n    m = C()\nuse(m)\n");
    CHECK(argNames(a, "inner") == "A,B");
    CHECK(argNames(a, "use") == "A,B,C");
  }
  SECTION("loops may run zero times") {
    CHECK(argNames(analyse("m = A()\nfor x in xs:\n    m = B()\nuse(m)\n"), "use") == "A,B");
    CHECK(argNames(analyse("m = A()\nwhile c:\n    m = B()\nuse(m)\n"), "use") == "A,B");
  }
  SECTION("try: a handler starts where the body started or ended; else where it ended") {
    auto a = analyse("m = A()\ntry:\n    m = B()\nexcept E:\n    handler(m)\n    m = C()\nuse(m)\n");
    CHECK(argNames(a, "handler") == "A,B");
    CHECK(argNames(a, "use") == "B,C");
    auto e = analyse("m = A()\ntry:\n    m = B()\nexcept E:\n    raise\nelse:\n    orelse(m)\nuse(m)\n");
    CHECK(argNames(e, "orelse") == "B");
    CHECK(argNames(e, "use") == "B");
  }
  SECTION("match: no case may match") {
    auto a = analyse("m = A()\nmatch v:\n    case 1:\n        m = B()\n    case 2:\n        m = C()\nuse(m)\n");
    CHECK(argNames(a, "use") == "A,B,C");
  }
  SECTION("a comprehension's variables stay inside it") {
    CHECK(argNames(analyse("x = A()\nys = [x for x in B()]\nuse(x)\n"), "use") == "A");
  }
  SECTION("a name bound in an if's first condition is bound in every arm") {
    auto a = analyse("if (n := A()):\n    first(n)\nelse:\n    second(n)\n");
    CHECK(argNames(a, "first") == "A");
    CHECK(argNames(a, "second") == "A");
  }
}

TEST_CASE("attribute stores across calls interpreted in place: the callee sees and changes the caller's",
          "[unit][bindings]") {
  // `make()` calls an argument, so these helpers are interpreted in their caller's context; test_it is
  // mentioned once, so it is analysed in place too.
  const std::string helpers =
      "class Box:\n    pass\n"
      "def setter(box, make):\n    box.m = make()\n"
      "def maybe(box, make):\n    if c:\n        box.m = make()\n"
      "def nested(box, make):\n    setter(box, make)\n    seen_inside(box.m)\n"
      "def reader(box, make):\n    seen_by_reader(box.m)\n    make()\n";
  SECTION("a store the callee makes is the caller's after the call; one it may make joins with the old") {
    auto a = analyse(helpers + "def test_it():\n    b = Box()\n    b.m = A()\n    reader(b, D)\n"
                               "    setter(b, B)\n    use1(b.m)\n    b.m = A()\n    maybe(b, C)\n    use2(b.m)\n");
    CHECK(argNames(a, "seen_by_reader") == "A");
    CHECK(argNames(a, "use1") == "B");
    CHECK(argNames(a, "use2") == "A,C");
  }
  SECTION("two calls deep, and inside an arm of the caller") {
    auto a = analyse(helpers + "def test_it():\n    b = Box()\n    b.m = A()\n    if d:\n        nested(b, B)\n"
                               "        in_arm(b.m)\n    else:\n        other(b.m)\n    use(b.m)\n");
    CHECK(argNames(a, "seen_inside") == "B");
    CHECK(argNames(a, "in_arm") == "B");
    CHECK(argNames(a, "other") == "A");
    CHECK(argNames(a, "use") == "A,B");
  }
}

TEST_CASE("function summaries", "[unit][summaries]") {
  auto a = analyse(
      "import torch\nfrom torch.distributed.fsdp import fully_shard\n"
      "def build(m, lr):\n    return torch.optim.AdamW(m.parameters(), lr=lr)\n"
      "def shard(m):\n    fully_shard(m)\n    return m\n"
      "def blocks_only(m):\n    for b in m.layers:\n        fully_shard(b)\n"
      "def f(m):\n    return g(m)\n"
      "def g(m):\n    return f(m)\n"
      "class GPT:\n    def configure_optimizers(self, wd):\n"
      "        groups = [{'params': [p for n, p in self.named_parameters()], 'weight_decay': wd}]\n"
      "        return torch.optim.AdamW(groups)\n",
      /*fsdp=*/true);
  auto summaryOf = [&](std::string_view q) { return summaryIn(a, q); };
  SECTION("returns an optimizer built from the parameters of argument 0") {
    const Summary* s = summaryOf("t.build");
    REQUIRE(s->returns.size() == 1);
    const Obj& opt = s->store.obj(s->returns[0]);
    CHECK(opt.hasTag("optimizer"));
    REQUIRE(opt.inputs().size() == 1);
    ObjId params = opt.inputs()[0].at(0);
    CHECK(s->store.describe(params) == "m.parameters()");
    CHECK(s->store.derivesFrom(params, s->params[0]));
    CHECK(s->describe().find("returns torch.optim.AdamW(...) {optimizer=AdamW}") != std::string::npos);
  }
  SECTION("wraps argument 0") {
    const Summary* s = summaryOf("t.shard");
    CHECK(s->describe().find("wrap m api=fully_shard") != std::string::npos);
    CHECK(s->returns == ValueSet{s->params[0]});
  }
  SECTION("calls fully_shard on the children of argument 0 but not on argument 0 itself") {
    const Summary* s = summaryOf("t.blocks_only");
    std::string d = s->describe();
    CHECK(d.find("wrap m.layers[*]") != std::string::npos);
    CHECK(d.find("wrap m api") == std::string::npos);
  }
  SECTION("recursion terminates") {
    const Summary* f = summaryOf("t.f");
    const Summary* g = summaryOf("t.g");
    CHECK((f->truncated || g->truncated));
  }
  SECTION("methods of the file's classes") {
    const Summary* s = summaryOf("t.GPT.configure_optimizers");
    REQUIRE(s->returns.size() == 1);
    CHECK(s->store.obj(s->returns[0]).hasTag("optimizer"));
  }
}

TEST_CASE("a summary cut only at its own recursive call is pure; a cut further up the chain is not", "[unit][summaries]") {
  auto a = analyse(
      "def walk(m):\n    for c in m.children():\n        walk(c)\n    return m\n"
      "def uses_walk(m):\n    return walk(m)\n"
      "def ping(x):\n    return pong(x)\n"
      "def pong(x):\n    return ping(x)\n");
  auto summaryOf = [&](std::string_view q) { return summaryIn(a, q); };
  // The call of itself is cut wherever walk's summary is computed: the same summary in every task.
  CHECK(summaryOf("t.walk")->truncated);
  CHECK(summaryOf("t.walk")->pure);
  CHECK(summaryOf("t.uses_walk")->pure);
  // ping's call of pong is followed, pong's call back into ping is cut: which one is cut depends on
  // which was entered first.
  CHECK_FALSE(summaryOf("t.ping")->pure);
  CHECK_FALSE(summaryOf("t.pong")->pure);
}

TEST_CASE("the shared summary cache drops the least recently used summaries past its size", "[unit][summaries]") {
  auto a = analyse("def f(m): pass\ndef g(m): pass\ndef h(m): pass\n");
  auto b = analyse("def k(m): pass\n", false, "u");
  const FunctionDef* f = a.module->findFunction("t.f");
  const FunctionDef* g = a.module->findFunction("t.g");
  const FunctionDef* h = a.module->findFunction("t.h");
  const FunctionDef* k = b.module->findFunction("u.k");
  REQUIRE((f && g && h && k));
  auto made = [](const FunctionDef* def, size_t objects) {  // a summary with this many objects
    auto s = std::make_shared<Summary>();
    s->def = def;
    s->store.objects.resize(objects);
    return std::shared_ptr<const Summary>(s);
  };
  SummaryCache cache(10);
  auto sf = cache.insert(made(f, 4));
  CHECK(cache.insert(made(f, 3)) == sf);  // the first one inserted stays
  cache.insert(made(g, 4));
  CHECK(cache.items() == 8);
  CHECK(cache.find(f) == sf);  // f is now used more recently than g
  cache.insert(made(h, 4));    // 12 items: g goes
  CHECK(cache.items() == 8);
  CHECK(cache.find(g) == nullptr);
  CHECK(cache.find(f) == sf);
  CHECK(cache.find(h) != nullptr);
  cache.insert(made(k, 2));
  cache.forget(a.module.get());  // f and h go with their module
  CHECK(cache.items() == 2);
  CHECK(cache.find(f) == nullptr);
  CHECK(cache.find(k) != nullptr);
  cache.insert(made(g, 30));  // larger than the whole cache: kept alone, k goes
  CHECK(cache.items() == 30);
  CHECK(cache.find(k) == nullptr);
  CHECK(cache.find(g) != nullptr);
}

TEST_CASE("callers use summaries: helpers, methods and the model's own class", "[unit][summaries]") {
  auto a = analyse(
      "import torch\n"
      "def build(m):\n    return torch.optim.AdamW(m.parameters())\n"
      "class GPT:\n    def configure_optimizers(self):\n        return build(self)\n"
      "model = GPT()\nopt = model.configure_optimizers()\nuse(opt)\n",
      /*fsdp=*/true);
  const Store& st = a.store();
  const Event* use = a.event("use");
  REQUIRE(use);
  REQUIRE(use->args[0].size() == 1);
  const Obj& opt = st.obj(use->args[0][0]);
  CHECK(opt.hasTag("optimizer"));
  ObjId params = opt.inputs().at(0).at(0);
  CHECK(st.describe(params) == "model.parameters()");
  // The construction inside `build` is reached through two call sites.
  CHECK(opt.origin.via.size() == 2);
}

TEST_CASE("a method's summary takes the methods it calls on self from its own class, for that class only",
          "[unit][summaries]") {
  auto a = analyse(
      "import torch\nfrom torch.distributed.fsdp import fully_shard\n"
      "class Base:\n"
      "    def setup(self, m):\n        self.wrap(m)\n        return self.build(m)\n"
      "    def wrap(self, m):\n        fully_shard(m)\n"
      "    def build(self, m):\n        return torch.optim.AdamW(m.parameters())\n"
      "class Sub(Base):\n"
      "    def build(self, m):\n        return torch.optim.SGD(m.parameters())\n"
      "class Static:\n"
      "    @staticmethod\n    def make(m):\n        return m.build(m)\n"
      "b = Base()\ns = Sub()\nuse(b.setup(model), s.setup(model))\n",
      /*fsdp=*/true);
  // Before: `self.build(m)` could run any subclass's `build`, so the summary depended on its caller and every
  // call interpreted the body again.
  const Summary* setup = summaryIn(a, "t.Base.setup");
  CHECK_FALSE(setup->contextDependent);
  CHECK(setup->receiverClass == a.analysis->findClass("t.Base"));
  std::string d = setup->describe();
  CHECK(d.find("wrap m api=fully_shard") != std::string::npos);
  CHECK(d.find("{optimizer=AdamW}") != std::string::npos);
  // A static method's first parameter is not `self`: its calls on it stay the caller's.
  CHECK(summaryIn(a, "t.Static.make")->receiverClass == nullptr);
  // A `Base` runs Base.build; a `Sub` (whose `build` overrides it) its own, not the summary made for `Base`.
  const Event* use = a.event("use");
  REQUIRE(use);
  REQUIRE(use->args.size() == 2);
  REQUIRE(use->args[0].size() == 1);
  REQUIRE(use->args[1].size() == 1);
  CHECK(a.store().obj(use->args[0][0]).tag("optimizer") == "AdamW");
  CHECK(a.store().obj(use->args[1][0]).tag("optimizer") == "SGD");
}

TEST_CASE("a function nested in a method takes the methods it calls on the method's self from its class",
          "[unit][summaries]") {
  auto a = analyse(
      "import torch\n"
      "class Dims:\n"
      "    def build(self):\n        def inner():\n            return self.make()\n        return inner()\n"
      "    def make(self):\n        return torch.optim.AdamW(self.parameters())\n"
      "def outer(self):\n    def inner():\n        return self.make()\n    return inner()\n"
      "d = Dims()\nuse(d.build())\n",
      /*fsdp=*/true);
  const Summary* inner = summaryIn(a, "t.Dims.build.inner");
  CHECK(inner->receiverClass == a.analysis->findClass("t.Dims"));
  CHECK(inner->receiverByClosure);
  const Summary* build = summaryIn(a, "t.Dims.build");
  CHECK_FALSE(build->contextDependent);
  CHECK(build->receiverClass == a.analysis->findClass("t.Dims"));
  CHECK(build->describe().find("{optimizer=AdamW}") != std::string::npos);
  // Not in a method: `self` is whatever the caller's scope holds.
  CHECK(summaryIn(a, "t.outer.inner")->receiverClass == nullptr);
  const Event* use = a.event("use");
  REQUIRE(use);
  REQUIRE(use->args.size() == 1);
  REQUIRE(use->args[0].size() == 1);
  CHECK(a.store().obj(use->args[0][0]).tag("optimizer") == "AdamW");
}

TEST_CASE("pathological input stays bounded and never crashes", "[unit][robustness]") {
  std::string deep = "import torch.optim\nimport torch.distributed.fsdp\ny = 1";
  for (int i = 0; i < 50000; ++i) deep += " + 1";
  deep += "\nx = " + std::string(3000, '(') + "1" + std::string(3000, ')') + "\n";
  deep += "xs = []\nxs.append(xs)\nopt = torch.optim.AdamW(xs)\n";
  CHECK_NOTHROW(analyse(deep, true));

  // Many functions calling each other twice: summaries would grow exponentially without budgets.
  std::string fanout = "import torch\nfrom torch.distributed.fsdp import fully_shard\n";
  fanout += "def f0(m):\n    fully_shard(m)\n    return torch.optim.AdamW(m.parameters())\n";
  for (int i = 1; i < 40; ++i)
    fanout += "def f" + std::to_string(i) + "(m):\n    f" + std::to_string(i - 1) + "(m)\n    return f" +
              std::to_string(i - 1) + "(m.child)\n";
  fanout += "f39(model)\n";
  auto a = analyse(fanout, true);
  CHECK(a.store().objects.size() < 2000000);
}

namespace {
// The regions that hold the first call of `name`.
std::vector<const Region*> regionsOf(const Analysed& a, std::string_view name) {
  const Event* e = a.event(name);
  REQUIRE(e);
  return a.store().regionsAt(e->point);
}
bool hasRegion(const std::vector<const Region*>& rs, std::string_view kind, std::string_view name, bool negated) {
  return std::any_of(rs.begin(), rs.end(), [&](const Region* r) {
    return r->kind == kind && r->negated == negated &&
           std::find(r->names.begin(), r->names.end(), name) != r->names.end();
  });
}
}  // namespace

TEST_CASE("regions: isinstance / hasattr tests, early returns and with bodies", "[unit][regions]") {
  SECTION("an if arm holds its test; the else arm holds it negated") {
    auto a = analyse("from m import C\nif isinstance(x, C):\n    a()\nelse:\n    b()\nc()\n");
    CHECK(hasRegion(regionsOf(a, "a"), "isinstance", "m.C", false));
    CHECK(hasRegion(regionsOf(a, "b"), "isinstance", "m.C", true));
    CHECK(regionsOf(a, "c").empty());
  }
  SECTION("a name bound to a test, `and`, `not`, parentheses, tuples of classes") {
    auto a = analyse(
        "from m import C, D\nok = isinstance(x, (C, D))\nif ok and y:\n    a()\nif not (hasattr(x, 'k')):\n    b()\n");
    auto ra = regionsOf(a, "a");
    CHECK(hasRegion(ra, "isinstance", "m.C", false));
    CHECK(hasRegion(ra, "isinstance", "m.D", false));
    CHECK(hasRegion(regionsOf(a, "b"), "hasattr", "k", true));
  }
  SECTION("`or` establishes nothing in its true arm") {
    auto a = analyse("from m import C\nif isinstance(x, C) or y:\n    a()\n");
    CHECK(regionsOf(a, "a").empty());
  }
  SECTION("what follows `if not <test>: return` holds the test") {
    auto a = analyse("from m import C\ndef f(x):\n    if not isinstance(x, C):\n        return\n    a()\nf(1)\n");
    CHECK(hasRegion(regionsOf(a, "a"), "isinstance", "m.C", false));
  }
  SECTION("a with body records its context manager's callee; inlined calls keep their regions") {
    auto a = analyse(
        "import pytest\ndef g():\n    a()\nwith pytest.raises(ValueError):\n    g()\nwith self.assertRaises(E):\n    b()\n");
    CHECK(hasRegion(regionsOf(a, "a"), "with", "pytest.raises", false));
    CHECK(hasRegion(regionsOf(a, "b"), "with", ".assertRaises", false));
  }
  SECTION("a test over a call is not evaluated twice and gives no region") {
    auto a = analyse("from m import C\nif isinstance(make(), C):\n    a()\n");
    CHECK(regionsOf(a, "a").empty());
    int makes = 0;
    for (const Event& e : a.store().events) makes += e.name == "make";
    CHECK(makes == 1);
  }
}

TEST_CASE("framework APIs the call model gives meaning to are not interpreted", "[unit][summaries]") {
  struct Framework final : CallModel {
    bool onCall(CallSite&) override { return false; }
    bool frameworkApi(std::string_view q) const override { return q.substr(0, 3) == "fw."; }
  };
  struct OneFunction final : ModuleProvider {
    Module* lib = nullptr;
    Found resolve(std::string_view q, const Module&) override {
      Found f;
      if (q == "fw.run" || q == "own.run") f.function = lib->topFunction("run");
      return f;
    }
  };
  SourceFile libFile("lib.py", "def run(x):\n    inner(x)\n");
  static thread_local syntax::Parser parser;
  syntax::Tree libTree = parser.parse(libFile.text);
  Framework model;
  Module lib(libFile, libTree.root(), "fw", 1);
  OneFunction provider;
  provider.lib = &lib;
  SourceFile user("t.py", "import fw\nimport own\nfw.run(1)\nown.run(2)\n");
  syntax::Tree tree = parser.parse(user.text);
  Module userModule(user, tree.root(), "t", 0);
  Session session(model, &provider);
  FileAnalysis fa(userModule, session);
  fa.run();
  int inner = 0;
  for (const Event& e : fa.moduleStore().events) inner += e.name == "inner";
  CHECK(inner == 1);  // only through own.run
}

// Regression: a chain of 5,000 helpers, each calling the next, nested summary computations 5,000
// deep on the C++ stack and crashed the run (segmentation fault, no output). On a thread with a
// small stack, as in the linter's worker pool, it must finish.
TEST_CASE("a 5,000-deep chain of helper calls is bounded, not a stack overflow", "[unit][robustness]") {
  std::string chain = "import torch\nfrom torch.distributed.fsdp import fully_shard\n";
  const int n = 5000;
  for (int i = n; i > 0; --i)  // callees first and last both occur in real code; define the deepest last
    chain += "def f" + std::to_string(n - i) + "(m):\n    return f" + std::to_string(n - i + 1) + "(m)\n";
  chain += "def f" + std::to_string(n) + "(m):\n    fully_shard(m)\n    return m\n";
  chain += "model = torch.nn.Linear(2, 2)\nopt = torch.optim.AdamW(model.parameters())\nf0(model)\nopt.step()\n";
  bool done = false;
  std::thread worker([&] {
    auto a = analyse(chain, true);
    done = a.store().objects.size() > 0;
  });
  worker.join();
  CHECK(done);
}

// Where the depth limit cuts a chain, the findings say so: an SL002 note (severity info) on
// the call that was not followed, naming the callee; the run goes on.
TEST_CASE("a call chain cut by the depth limit gets an SL002 note on the cut call", "[unit][robustness]") {
  std::string chain = "import torch\nfrom torch.distributed.fsdp import fully_shard\n";
  const int n = 60;
  for (int i = 0; i < n; ++i)
    chain += "def f" + std::to_string(i) + "(m):\n    return f" + std::to_string(i + 1) + "(m)\n";
  chain += "def f" + std::to_string(n) + "(m):\n    fully_shard(m)\n    return m\n";
  chain += "model = torch.nn.Linear(2, 2)\nopt = torch.optim.AdamW(model.parameters())\nf0(model)\nopt.step()\n";
  shardlint::LintOptions options;
  shardlint::Linter linter(rules::catalog(), options);
  auto found = linter.lintText("chain.py", chain);
  const shardlint::Diagnostic* cut = nullptr;
  for (const auto& d : found)
    if (d.code == "SL002") cut = &d;
  REQUIRE(cut);
  CHECK(cut->severity == shardlint::Severity::Info);
  CHECK(cut->message.find("analysis cut short") != std::string::npos);
  CHECK(cut->message.find("more than 48 functions deep") != std::string::npos);
  // On the call in f47, whose summary is the 48th nested one (0-based line 2 + 2*47 + 1).
  CHECK(cut->location.start.line == 2u + 2u * 47u + 1u);
  CHECK(cut->message.find("`chain.f48`") != std::string::npos);
  // A shallow chain has no such note.
  auto shallow = linter.lintText("short.py", "def f(m):\n    return g(m)\ndef g(m):\n    return m\nf(1)\n");
  for (const auto& d : shallow) CHECK(d.code != "SL002");
}

// The words a file's code mentions (FileAnalysis: a function mentioned once is one nothing here calls):
// comments and strings mention none, but a string that is one word (getattr's) and an f-string's (or a
// template string's) words count; prefixes, triple quotes, escapes and an unterminated string are lexed as Python does or, where
// the text does not lex, counted as code (too often, never too rarely).
TEST_CASE("codeWordCounts: the words code mentions, not those of comments and strings", "[unit]") {
  std::string text = R"PY(def step(self):  # step is called by the trainer
    """Run one step.

    accelerator.prepare(step) 'quoted' """
    getattr(self, "train")()
    x = 'not prepare'
    y = r'\d' + b"raw" + Rb'bytes'
    z = f"{helper(x)} and {other}" + t'{template()}' + Rf"{raw_field}"
    w = 'it\'s' + "a \" quote" + fix
    s = '''one
'two' three'''
    u = 'unterminated
    return after
)PY";
  auto counts = shardlint::syntax::codeWordCounts(text);
  auto n = [&](std::string_view w) {
    auto it = counts.find(w);
    return it == counts.end() ? 0 : it->second;
  };
  CHECK(n("step") == 1);  // its def; the comment and the docstring do not count
  CHECK(n("prepare") == 0);  // in a docstring and inside a longer string
  CHECK(n("accelerator") == 0);
  CHECK(n("quoted") == 0);
  CHECK(n("train") == 1);  // a one-word string: getattr may name a method with it
  CHECK(n("getattr") == 1);
  CHECK(n("raw") == 1);  // b"raw" is one word as a whole
  CHECK(n("bytes") == 1);
  CHECK(n("d") == 0);  // r'\d' is not a word
  CHECK(n("helper") == 1);  // f-string fields are code
  CHECK(n("other") == 1);
  CHECK(n("template") == 1);  // so are a template string's (Python 3.14)
  CHECK(n("raw_field") == 1);
  CHECK(n("quote") == 0);  // the escaped quote does not end the string
  CHECK(n("fix") == 1);  // after the strings with escapes, code again
  CHECK(n("two") == 0);  // inside a triple-quoted string
  CHECK(n("three") == 0);
  CHECK(n("unterminated") == 1);  // an unterminated string is read as code
  CHECK(n("after") == 1);
  CHECK(n("self") == 2);
  // Asked about a few words: the same counts for those, nothing kept for the others.
  std::unordered_set<std::string_view> only{"step", "train", "helper", "self", "absent"};
  auto some = shardlint::syntax::codeWordCounts(text, &only);
  CHECK(some.size() == 4);
  for (std::string_view w : only)
    CHECK((some.count(w) ? some.at(w) : 0) == n(w));
}

// The pre-scan's one-pass word search answers what one std::string_view::find per word answers: words
// sharing a first byte, a word inside another, at the very end, overlapping, empty, and over 64 words.
TEST_CASE("WordSet: one pass finds what find() finds", "[unit]") {
  std::vector<std::string_view> words = {"optim", "optimizer", "fully_shard", "FSDP", "FullyShardedDataParallel",
                                         ".prepare(", "prepare", "", "rank", "r", "zz", "state_dict"};
  std::vector<std::string> more;
  for (int i = 0; i < 60; ++i) more.push_back("w" + std::to_string(i) + "_");
  for (const auto& m : more) words.push_back(m);
  shardlint::WordSet set(words);
  auto naive = [&](std::string_view text) {
    uint64_t m = 0;
    for (size_t i = 0; i < words.size() && i < 64; ++i)
      if (!words[i].empty() && text.find(words[i]) != std::string_view::npos) m |= uint64_t{1} << i;
    return m;
  };
  for (std::string_view text : {std::string_view(""), std::string_view("optimizer = FSDP(model)"),
                                std::string_view("x.prepare(model)"), std::string_view("ful"), std::string_view("zzz"),
                                std::string_view("w3_ w51_ w52_ state_dic"), std::string_view("...rank"),
                                std::string_view("xr"), std::string_view("r"), std::string_view("z")}) {
    INFO(text);
    CHECK(set.scan(text) == naive(text));
  }
  // Random texts over the words' own letters, so partial matches are frequent.
  std::mt19937 rng(7);
  const std::string alphabet = "optimzerfulshardFSDP_.()rankw0123456789";
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    size_t len = rng() % 200;
    for (size_t i = 0; i < len; ++i) {
      if (rng() % 16 == 0) text += words[rng() % words.size()];
      else text += alphabet[rng() % alphabet.size()];
    }
    INFO(text);
    REQUIRE(set.scan(text) == naive(text));
  }
}

// changedSpan: the common prefix, then the common suffix of the rest, across the memcmp blocks' edges.
TEST_CASE("changedSpan: where two texts differ, as one edit", "[unit]") {
  auto naive = [](std::string_view a, std::string_view b) {
    size_t p = 0, n = std::min(a.size(), b.size());
    while (p < n && a[p] == b[p]) ++p;
    size_t s = 0;
    while (s < n - p && a[a.size() - 1 - s] == b[b.size() - 1 - s]) ++s;
    return std::array<size_t, 3>{p, a.size() - s, b.size() - s};
  };
  std::mt19937 rng(11);
  for (int round = 0; round < 3000; ++round) {
    std::string a;
    size_t len = rng() % 1500;
    for (size_t i = 0; i < len; ++i) a += "ab\n"[rng() % 3];
    std::string b = a;
    size_t at = len ? rng() % (len + 1) : 0, cut = std::min<size_t>(rng() % 20, len - at);
    b.replace(at, cut, std::string(rng() % 20, "abc"[rng() % 3]));
    if (round % 7 == 0) b = a;
    auto c = shardlint::changedSpan(a, b);
    INFO(round);
    REQUIRE(std::array<size_t, 3>{c.begin, c.oldEnd, c.newEnd} == naive(a, b));
  }
}

// The language server's pre-scan works out an open document's mask from its last one and the edit; it must
// be the mask of the new text: words typed, deleted, split, joined, at either end, or only elsewhere too.
TEST_CASE("PythonWords: a mask worked out across an edit is the new text's mask", "[unit]") {
  shardlint::LintOptions options;
  auto rules = shardlint::selectedRules(rules::catalog(), options);
  shardlint::PythonWords words(rules, rules::catalog(), options);
  REQUIRE(words.words.size() > 4);
  std::mt19937 rng(5);
  const std::string alphabet = "optimzerfulshardFSDP_.()rank \n";
  auto piece = [&] {
    return rng() % 4 == 0 ? std::string(words.words[rng() % words.words.size()])
                          : std::string(1, alphabet[rng() % alphabet.size()]);
  };
  for (int round = 0; round < 3000; ++round) {
    std::string before;
    for (size_t n = 300 + rng() % 600; n > 0; --n) before += piece();
    std::string after = before;
    size_t at = before.empty() ? 0 : rng() % (before.size() + 1), cut = std::min<size_t>(rng() % 12, before.size() - at);
    std::string typed;
    for (size_t n = rng() % 3; n > 0; --n) typed += piece();
    after.replace(at, cut, typed);
    INFO(before << "\n->\n" << after);
    REQUIRE(words.maskAfterEdit(before, words.mask(before), after) == words.mask(after));
  }
}

// The language server keeps an open document's scanned imports across an edit that touches no line mentioning
// `import`: scanImports must then answer as before.
TEST_CASE("importLinesDiffer: an edit it calls harmless leaves scanImports' answer as it was", "[unit]") {
  const std::vector<std::string> pieces = {"import a\n", "from b import c, d\n", "x = 1\n", "import e as f  # g\n",
                                           "    def h(self):\n", "        return i\n", "from . import (j,\n", " k)\n",
                                           "\n", "# import z\n"};
  std::mt19937 rng(3);
  const std::string typed = "imprt oa\n ,.(#x";
  size_t harmless = 0;
  for (int round = 0; round < 4000; ++round) {
    std::string before;
    for (size_t n = 1 + rng() % 12; n > 0; --n) before += pieces[rng() % pieces.size()];
    std::string after = before;
    size_t at = rng() % (before.size() + 1), cut = std::min<size_t>(rng() % 4, before.size() - at);
    std::string add;
    for (size_t n = rng() % 4; n > 0; --n) add += typed[rng() % typed.size()];
    after.replace(at, cut, add);
    shardlint::ChangedSpan span = shardlint::changedSpan(before, after);
    if (shardlint::importLinesDiffer(before, after, span)) continue;
    ++harmless;
    INFO(before << "\n->\n" << after);
    REQUIRE(shardlint::scanImports(after) == shardlint::scanImports(before));
  }
  CHECK(harmless > 500);
}

// absolutePathKey's shortcut for paths already absolute and normal gives what the full computation gives.
TEST_CASE("absolutePathKey: normal absolute paths as they are, the others made so", "[unit]") {
  for (std::string p : {"/a/b.py", "/a/b/", "/", "/a/.hidden/x.py", "/a/..b/c", "/a/b..", "/a/./b", "/a/../b", "/a//b",
                        "/a/b/.", "/a/b/..", "//a", "a/b.py", "./a", "../a", "", "/a/...", "/a/.../b"}) {
    INFO(p);
    std::error_code ec;
    auto abs = std::filesystem::absolute(p, ec);
    std::string slow = (ec ? std::filesystem::path(p) : abs).lexically_normal().string();
    CHECK(shardlint::absolutePathKey(p) == slow);
    CHECK(shardlint::absolutePathKey(p, std::filesystem::current_path().string()) == slow);  // the working folder given
  }
}
