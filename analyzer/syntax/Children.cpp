// The children of nodes, remembered. field(), fieldChildren() and namedChildren() (syntax/TreeSitter.h)
// are most of the interpreter's walks over the tree, and it asks about the same nodes again and again:
// each time it runs a function (a summary, an arm, a caller's context), and in the editor after each
// edit, whose incremental parse shares every subtree the edit did not touch with the tree before it.
// tree-sitter answers each question by walking the node's children again (ts_node_child_by_field_id, a
// cursor pass), several hundred instructions a call. Here a node's children, with their fields and
// whether they are named, are read by one cursor pass the first time and kept in a table of the calling
// thread.
//
// A node is known by its subtree and its position (start byte, row and column): a subtree never changes
// while it lives (tree-sitter copies a shared subtree before an edit changes it), and its children's
// positions follow from its own. So the same entry answers for the same unchanged statement in the tree
// before an edit and the tree after it. What keeps a subtree alive, so that its address cannot come back
// as another subtree's, is a copy of a tree that holds it: the table keeps a copy (ts_tree_copy, which
// only takes a reference on the root) of each tree it has answered for, up to kHeldTrees. Each entry
// carries the generation of the newest tree that asked about it; when the table lets its oldest trees go,
// it drops the entries no newer tree asked about. It starts again when it holds kMaxChildren children.
#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

#include "syntax/TreeSitter.h"

namespace shardlint::syntax {

namespace {

struct Child {
  TSNode node;  // its `tree` is the one of the node asked about when it was read: answers take the asker's
  TSFieldId field;
  bool named;
};

const void* rootSubtree(const void* rootPlace) { return *static_cast<const void* const*>(rootPlace); }

std::atomic<bool> gRemember{false};

// A cursor per thread, reset for each use: its stack is allocated once, not per call.
class ThreadCursor {
 public:
  ThreadCursor() = default;
  ThreadCursor(const ThreadCursor&) = delete;
  ThreadCursor& operator=(const ThreadCursor&) = delete;
  ~ThreadCursor() {
    if (live_) ts_tree_cursor_delete(&cursor_);
  }
  // Calls `take(cursor)` for each child of `n` in order while it returns true (`take` must not use
  // this function).
  template <class Take>
  void eachChild(TSNode n, Take&& take) {
    if (live_) {
      ts_tree_cursor_reset(&cursor_, n);
    } else {
      cursor_ = ts_tree_cursor_new(n);
      live_ = true;
    }
    if (!ts_tree_cursor_goto_first_child(&cursor_)) return;
    do {
      if (!take(static_cast<const TSTreeCursor&>(cursor_))) return;
    } while (ts_tree_cursor_goto_next_sibling(&cursor_));
  }

 private:
  TSTreeCursor cursor_{};
  bool live_ = false;
};

ThreadCursor& cursor() {
  thread_local ThreadCursor c;
  return c;
}

struct Span {
  const Child* first = nullptr;
  const Child* last = nullptr;
  const Child* begin() const { return first; }
  const Child* end() const { return last; }
};

class ChildTable {
 public:
  ChildTable() = default;
  ChildTable(const ChildTable&) = delete;
  ChildTable& operator=(const ChildTable&) = delete;
  ~ChildTable() {
    releaseHeld(held_.size());
  }

  // The children of `n` (none for a null node); the span is valid until the next call on this thread.
  Span children(TSNode n) {
    if (ts_node_is_null(n)) return {};
    // A root node's id is the root's place in the tree itself (TSTree), which a later tree may reuse at
    // the same address with another root: roots are read each time.
    if (n.tree != lastTree_) {
      lastTree_ = n.tree;
      lastRootPlace_ = ts_tree_root_node(n.tree).id;  // a place in the tree itself: the same for its address
    }
    const void* rootPlace = lastRootPlace_;
    if (n.id == rootPlace) {
      rootKids_.clear();
      readChildren(n, rootKids_);
      return {rootKids_.data(), rootKids_.data() + rootKids_.size()};
    }
    uint64_t gen = generationOf(n.tree, rootPlace);
    if (slots_.empty()) slots_.assign(kFirstSlots, Slot{});
    size_t mask = slots_.size() - 1;
    for (size_t i = hashOf(n.id, n.context[0]) & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (!s.id) break;
      if (s.id == n.id && s.start == n.context[0] && s.row == n.context[1] && s.column == n.context[2]) {
        if (s.gen < gen) s.gen = gen;
        return {kids_.data() + s.first, kids_.data() + s.first + s.count};
      }
    }
    if (kids_.size() >= kMaxChildren) {
      clear();
      gen = generationOf(n.tree, rootPlace);
    }
    auto first = static_cast<uint32_t>(kids_.size());
    readChildren(n, kids_);
    Slot s;
    s.id = n.id;
    s.start = n.context[0];
    s.row = n.context[1];
    s.column = n.context[2];
    s.first = first;
    s.count = static_cast<uint32_t>(kids_.size() - first);
    s.gen = gen;
    insert(s);
    return {kids_.data() + first, kids_.data() + kids_.size()};
  }

  size_t remembered() const { return used_; }
  size_t heldTrees() const { return held_.size(); }

 private:
  struct Slot {
    const void* id = nullptr;
    uint32_t start = 0;
    uint32_t row = 0;
    uint32_t column = 0;
    uint32_t first = 0;
    uint32_t count = 0;
    uint64_t gen = 0;
  };
  struct Held {
    const void* root;  // the tree's root subtree, kept alive by `copy`
    TSTree* copy;
    uint64_t gen;
  };
  static constexpr size_t kFirstSlots = 1024;
  // About 10 MB of children (40 bytes each) before a table starts again.
  static constexpr size_t kMaxChildren = 256 * 1024;
  // Trees held at most: the editor's tree before an edit and the one after it, a file and the modules
  // its analysis loaded. Past it the older half goes.
  static constexpr size_t kHeldTrees = 64;

  static size_t hashOf(const void* id, uint32_t start) {
    uint64_t h = (reinterpret_cast<uintptr_t>(id) >> 3) * 0x9E3779B97F4A7C15ull;
    h ^= uint64_t{start} * 0xC2B2AE3D27D4EB4Full;
    return static_cast<size_t>(h ^ (h >> 29));
  }

  // The generation of `tree`, holding a copy of it when it is new to the table. Trees are told apart by
  // their root subtree (`rootPlace`, the root node's id, is the tree's own slot of it: tree-sitter's
  // Subtree, a union whose pointer member is the heap subtree a root always is). The copy keeps that
  // subtree alive, so no other tree can have it unless it is a copy of the same tree (the module table
  // hands out copies); an edit in place gives the edited tree another root. A tree asked about again
  // gets a new generation, so the trees in use are the last to go.
  uint64_t generationOf(const TSTree* tree, const void* rootPlace) {
    const void* root = rootSubtree(rootPlace);
    if (!held_.empty() && held_.back().root == root) return held_.back().gen;
    for (size_t i = held_.size(); i-- > 0;) {
      if (held_[i].root != root) continue;
      Held h = held_[i];
      held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
      h.gen = nextGen_++;
      held_.push_back(h);
      return h.gen;
    }
    if (held_.size() >= kHeldTrees) letOldestGo(kHeldTrees / 2);
    held_.push_back(Held{root, ts_tree_copy(tree), nextGen_++});
    return held_.back().gen;
  }

  // Lets the `count` oldest trees go, and the entries no newer tree asked about with them.
  void letOldestGo(size_t count) {
    uint64_t keepAbove = held_[count - 1].gen;
    std::vector<Slot> kept;
    std::vector<Child> keptKids;
    for (const Slot& s : slots_) {
      if (!s.id || s.gen <= keepAbove) continue;
      Slot moved = s;
      moved.first = static_cast<uint32_t>(keptKids.size());
      keptKids.insert(keptKids.end(), kids_.begin() + s.first, kids_.begin() + s.first + s.count);
      kept.push_back(moved);
    }
    kids_.swap(keptKids);
    std::fill(slots_.begin(), slots_.end(), Slot{});
    used_ = 0;
    for (const Slot& s : kept) place(s);
    releaseHeld(count);
  }

  void releaseHeld(size_t count) {
    for (size_t i = 0; i < count; ++i) ts_tree_delete(held_[i].copy);
    held_.erase(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(count));
  }

  void clear() {
    if (used_) std::fill(slots_.begin(), slots_.end(), Slot{});
    used_ = 0;
    kids_.clear();
    releaseHeld(held_.size());
  }

  void insert(const Slot& slot) {
    if ((used_ + 1) * 2 > slots_.size()) {
      std::vector<Slot> old(slots_.size() * 2);
      old.swap(slots_);
      used_ = 0;
      for (const Slot& s : old)
        if (s.id) place(s);
    }
    place(slot);
  }

  void place(const Slot& slot) {
    size_t mask = slots_.size() - 1;
    size_t i = hashOf(slot.id, slot.start) & mask;
    while (slots_[i].id) i = (i + 1) & mask;
    slots_[i] = slot;
    ++used_;
  }

  static void readChildren(TSNode n, std::vector<Child>& into) {
    cursor().eachChild(n, [&](const TSTreeCursor& cur) {
      TSNode c = ts_tree_cursor_current_node(&cur);
      into.push_back(Child{c, ts_tree_cursor_current_field_id(&cur), ts_node_is_named(c)});
      return true;
    });
  }

  std::vector<Slot> slots_;
  size_t used_ = 0;
  std::vector<Child> kids_;
  std::vector<Child> rootKids_;
  const TSTree* lastTree_ = nullptr;
  const void* lastRootPlace_ = nullptr;
  std::vector<Held> held_;  // oldest first
  uint64_t nextGen_ = 1;
};

ChildTable& table() {
  thread_local ChildTable t;
  return t;
}

// A remembered child as a node of the tree asked about.
inline TSNode asked(const Child& c, TSNode parent) {
  TSNode out = c.node;
  out.tree = parent.tree;
  return out;
}

}  // namespace

size_t rememberedNodes() { return table().remembered(); }
size_t heldTrees() { return table().heldTrees(); }
const void* rootSubtreeOf(const TSTree* tree) { return rootSubtree(ts_tree_root_node(tree).id); }

void rememberChildren(bool on) { gRemember.store(on, std::memory_order_relaxed); }

TSNode field(TSNode n, std::string_view name) {
  TSFieldId id = PyKinds::instance().field(name);
  if (!id) return {};
  if (gRemember.load(std::memory_order_relaxed)) {
    for (const Child& c : table().children(n))
      if (c.field == id) return asked(c, n);
    return {};
  }
  // tree-sitter's own answer, but for the one field tree-sitter-python gives from a grandchild: a
  // match_statement's "alternative", a field of the hidden rule its body is an alias of.
  static const TSFieldId alternative = PyKinds::instance().field("alternative");
  if (id == alternative && PyKinds::instance().kind(n) == Kind::match_statement) return {};
  return ts_node_child_by_field_id(n, id);
}

std::vector<TSNode> fieldChildren(TSNode n, std::string_view name) {
  std::vector<TSNode> out;
  TSFieldId id = PyKinds::instance().field(name);
  if (!id || ts_node_is_null(n)) return out;
  if (gRemember.load(std::memory_order_relaxed)) {
    for (const Child& c : table().children(n))
      if (c.field == id) out.push_back(asked(c, n));
    return out;
  }
  cursor().eachChild(n, [&](const TSTreeCursor& cur) {
    if (ts_tree_cursor_current_field_id(&cur) == id) out.push_back(ts_tree_cursor_current_node(&cur));
    return true;
  });
  return out;
}

NodeList namedChildren(TSNode n) {
  NodeList out;
  if (ts_node_is_null(n)) return out;
  if (gRemember.load(std::memory_order_relaxed)) {
    for (const Child& c : table().children(n))
      if (c.named) out.push_back(asked(c, n));
    return out;
  }
  cursor().eachChild(n, [&](const TSTreeCursor& cur) {
    TSNode c = ts_tree_cursor_current_node(&cur);
    if (ts_node_is_named(c)) out.push_back(c);
    return true;
  });
  return out;
}

NodeList children(TSNode n) {
  NodeList all;
  if (ts_node_is_null(n)) return all;
  if (gRemember.load(std::memory_order_relaxed)) {
    for (const Child& c : table().children(n)) all.push_back(asked(c, n));
    return all;
  }
  // A few children (an operator's operands and token): tree-sitter's own walk costs less than a cursor's reset.
  uint32_t count = ts_node_child_count(n);
  if (count <= 4) {
    for (uint32_t i = 0; i < count; ++i) all.push_back(ts_node_child(n, i));
  } else {
    cursor().eachChild(n, [&](const TSTreeCursor& cur) {
      all.push_back(ts_tree_cursor_current_node(&cur));
      return true;
    });
  }
  return all;
}

}  // namespace shardlint::syntax
