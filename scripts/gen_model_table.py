#!/usr/bin/env python3
"""Generate rules/config/ModelTable.generated.inc, SL401's table of transformers model families.

For every model family of a pinned transformers release (the directory name under
src/transformers/models/) the table holds:
  - ids:     lower-case patterns of Hugging Face Hub ids that name the family (the directory name
             without '_', plus the hand-kept ALIASES below);
  - layers:  the classes the family's `_no_split_modules` lists (what accelerate and the Trainer
             auto-wrap);
  - archs:   the PreTrainedModel classes (`LlamaModel`, `LlamaForCausalLM`, ...): importing or
             subclassing one is evidence that the project loads the family;
  - classes: every other class the family's modeling files define (minus output dataclasses), so
             that "this class is not in the model" can be decided;
  - deps:    other families whose modeling files this one imports classes from (their classes are in
             the model too);
  - open:    the modeling files build a sub-model through the auto classes, a backbone loader or timm,
             so the model's class set depends on the checkpoint's config: unknown.
Class names from torch.nn and from transformers' shared modules (modeling_layers, integrations, ...)
that modeling files use go into one shared list that every model may contain.

Only the standard library is used; the source is parsed with `ast`.

Usage (from the repository root):
  python3 scripts/gen_model_table.py --git-dir PATH/TO/transformers/.git --rev v5.15.0 \
      --out rules/config/ModelTable.generated.inc
  python3 scripts/gen_model_table.py --src PATH/TO/transformers --out rules/config/ModelTable.generated.inc
"""
import argparse
import ast
import os
import re
import subprocess
import sys

# Hub ids that do not contain the family's directory name. pattern -> families. Kept by hand.
ALIASES = {
    "vicuna": ["llama"],
    "tinyllama": ["llama"],
    "alpaca": ["llama"],
    "smollm": ["llama"],
    "codellama": ["llama"],
    "zephyr": ["mistral"],
    "qwq": ["qwen2"],
    "qwen1.5": ["qwen2"],
    "pythia": ["gpt_neox"],
    "gpt-neox": ["gpt_neox"],
    "distilgpt2": ["gpt2"],
    "flan-t5": ["t5"],
    "deepseek": ["deepseek_v2", "deepseek_v3"],
    # Falcon3 and Falcon-E (BitNet) checkpoints are Llama architectures, not the `falcon` family.
    "falcon3": ["llama"],
    "falcon-e": ["llama", "bitnet"],
}
# Directories without modeling files whose checkpoints load another family's classes.
TOKENIZER_ONLY = {
    "code_llama": ["llama"],
    "byt5": ["t5"],
    "myt5": ["t5"],
    "mbart50": ["mbart"],
    "nllb": ["m2m_100"],
}
# Imports that make a model's class set depend on the checkpoint's config.
OPEN_IMPORT_NAMES = re.compile(r"^(AutoModel\w*|AutoBackbone|load_backbone|TimmWrapperModel|create_model)$")
OPEN_MODULES = re.compile(r"(^|\.)(auto|timm|backbone_utils)(\.|$)")
# Names from shared modules that are no nn.Module (outputs, caches, mixins, configs, ...): left out.
NOT_A_MODULE = re.compile(r"(Output\w*|Cache|Mixin|Config|Processor|Streamer|Interface|Manager|Kwargs|Dict|"
                          r"Criteria|Strategy|Enum|Type|Error|Warning)$")
CAMEL = re.compile(r"^[A-Z][A-Za-z0-9_]*[a-z][A-Za-z0-9_]*$")


class Source:
    """Files of a transformers checkout (--src) or of one commit of a git directory (--git-dir)."""

    def __init__(self, src=None, git_dir=None, rev=None):
        self.src, self.git_dir, self.rev = src, git_dir, rev
        self.commit = None
        if git_dir:
            self.commit = self._git("rev-parse", rev + "^{commit}").strip()
            self.subject = self._git("log", "-1", "--format=%s", self.commit).strip()
            self.tree = {}  # path -> blob id
            for line in self._git("ls-tree", "-r", self.commit, "src/transformers/").splitlines():
                meta, path = line.split("\t", 1)
                self.tree[path] = meta.split()[2]
            self.cat = subprocess.Popen(["git", "--git-dir", git_dir, "cat-file", "--batch"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def _git(self, *args):
        return subprocess.run(["git", "--git-dir", self.git_dir, *args], check=True, capture_output=True,
                              text=True).stdout

    def list_dir(self, path):
        path = path.rstrip("/") + "/"
        if self.git_dir:
            return sorted({p[len(path):].split("/")[0] for p in self.tree if p.startswith(path)})
        return sorted(os.listdir(os.path.join(self.src, path)))

    def is_dir(self, path):
        if self.git_dir:
            return any(p.startswith(path.rstrip("/") + "/") for p in self.tree)
        return os.path.isdir(os.path.join(self.src, path))

    def read(self, path):
        if self.git_dir:
            self.cat.stdin.write((self.tree[path] + "\n").encode())
            self.cat.stdin.flush()
            size = int(self.cat.stdout.readline().split()[2])
            data = self.cat.stdout.read(size + 1)[:-1]
            return data.decode("utf-8")
        with open(os.path.join(self.src, path), encoding="utf-8") as f:
            return f.read()


def dotted(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return inner + "." + node.attr if inner else None
    if isinstance(node, ast.Subscript):  # Generic[T], nn.ModuleList[...]
        return dotted(node.value)
    return None


def is_output_class(cls, base_names):
    for d in cls.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if (dotted(target) or "").split(".")[-1] == "dataclass":
            return True
    return any(b == "ModelOutput" or b.endswith("Output") or b.endswith("OutputWithPast") for b in base_names)


def analyse_family(source, family, files):
    classes = {}  # name -> base last names
    outputs = set()
    layers, deps, shared = [], set(), set()
    open_reason = None
    for path in files:
        tree = ast.parse(source.read(path), filename=path)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [b.split(".")[-1] for b in (dotted(x) for x in node.bases) if b]
                classes[node.name] = bases
                if is_output_class(node, bases):
                    outputs.add(node.name)
                for stmt in node.body:
                    if isinstance(stmt, ast.Assign) and any(
                            isinstance(t, ast.Name) and t.id == "_no_split_modules" for t in stmt.targets):
                        if isinstance(stmt.value, (ast.List, ast.Tuple, ast.Set)):
                            for elt in stmt.value.elts:
                                if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                                    if elt.value not in layers:
                                        layers.append(elt.value)
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                names = [a.name for a in node.names]
                if OPEN_MODULES.search(module) and any(OPEN_IMPORT_NAMES.match(n) for n in names):
                    open_reason = open_reason or next(n for n in names if OPEN_IMPORT_NAMES.match(n))
                elif module.split(".")[0] == "timm":
                    open_reason = open_reason or "timm"
                elif node.level == 2 and module:  # from ..other_family.modeling_x import Y
                    other = module.split(".")[0]
                    if other not in (family, "auto"):
                        deps.add(other)
                elif node.level >= 3 and module.startswith("models."):  # from ...models.x import Y
                    other = module.split(".")[1]
                    if other == "auto":
                        if any(OPEN_IMPORT_NAMES.match(n) for n in names):
                            open_reason = open_reason or next(n for n in names if OPEN_IMPORT_NAMES.match(n))
                    elif other != family:
                        deps.add(other)
                elif node.level >= 3:  # transformers' shared modules: classes a model may contain
                    shared.update(n for n in names if CAMEL.match(n) and not NOT_A_MODULE.search(n))
            elif isinstance(node, ast.Import):
                if any(a.name.split(".")[0] == "timm" for a in node.names):
                    open_reason = open_reason or "timm"
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "nn":
                if CAMEL.match(node.attr):
                    shared.add(node.attr)

    # PreTrainedModel subclasses (through the family's own classes): the architecture classes.
    def reaches_pretrained(name, seen=()):
        if name in seen:
            return False
        for b in classes.get(name, []):
            if b == "PreTrainedModel" or b.endswith("PreTrainedModel") or reaches_pretrained(b, seen + (name,)):
                return True
        return False

    archs = [c for c in classes if c not in outputs and (reaches_pretrained(c) or c.endswith("PreTrainedModel"))]
    others = [c for c in classes if c not in outputs and c not in archs and c not in layers]
    return {
        "layers": layers,
        "archs": sorted(archs),
        "classes": sorted(others),
        "deps": sorted(deps),
        "open": open_reason,
        "shared": shared,
    }


def id_patterns(family):
    pats = [family.replace("_", "")]
    for alias, fams in ALIASES.items():
        if family in fams:
            pats.append(alias)
    return pats


def cxx_str(words):
    return '"' + " ".join(words) + '"'


def class_prefix(fam):
    """The family's class-name prefix (`Llama` for LlamaPreTrainedModel), written `~` in the table."""
    for a in fam["archs"]:
        if a.endswith("PreTrainedModel") and len(a) > len("PreTrainedModel"):
            return a[: -len("PreTrainedModel")]
    return ""


def abbreviate(names, prefix):
    return [("~" + n[len(prefix):]) if prefix and n.startswith(prefix) else n for n in names]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", help="a transformers checkout (the directory holding src/transformers)")
    ap.add_argument("--git-dir", help="a transformers git directory (read with git ls-tree / git show)")
    ap.add_argument("--rev", default="HEAD", help="tag or commit to read with --git-dir (default HEAD)")
    ap.add_argument("--out", help="output file (default: stdout)")
    args = ap.parse_args()
    if bool(args.src) == bool(args.git_dir):
        ap.error("give exactly one of --src and --git-dir")
    source = Source(src=args.src, git_dir=args.git_dir, rev=args.rev)
    init = source.read("src/transformers/__init__.py")
    m = re.search(r'^__version__\s*=\s*"([^"]+)"', init, re.M)
    version = m.group(1) if m else "unknown"
    models = "src/transformers/models"
    families = {}
    shared = set()
    for d in source.list_dir(models):
        # `auto` holds the Auto* classes, which name no family.
        if d.startswith("_") or d == "auto" or not source.is_dir(f"{models}/{d}"):
            continue
        files = [f"{models}/{d}/{f}" for f in source.list_dir(f"{models}/{d}")
                 if f.startswith("modeling_") and f.endswith(".py")
                 and not f.startswith(("modeling_tf_", "modeling_flax_"))]
        if not files:
            if d in TOKENIZER_ONLY:
                families[d] = {"layers": [], "archs": [], "classes": [], "deps": TOKENIZER_ONLY[d], "open": None,
                               "shared": set()}
            continue
        families[d] = analyse_family(source, d, files)
        shared |= families[d]["shared"]
    for fam in families.values():  # a dependency on a family that is not in the table: unknown
        for dep in fam["deps"]:
            if dep not in families:
                fam["open"] = fam["open"] or f"imports from {dep}"
    for alias, fams in ALIASES.items():
        for f in fams:
            if f not in families:
                print(f"warning: alias {alias!r} names {f!r}, which is not a family of this release", file=sys.stderr)

    where = (f"commit {source.commit} ({source.subject.replace(chr(34), '')})" if source.commit
             else "a checkout with no commit recorded")
    cmd = "python3 scripts/gen_model_table.py " + (
        f"--git-dir TRANSFORMERS_GIT_DIR --rev {args.rev}" if args.git_dir else "--src TRANSFORMERS_CHECKOUT")
    lines = [
        "// GENERATED by scripts/gen_model_table.py. Do not edit by hand.",
        f"// Source: huggingface/transformers {version}, {where},",
        "// src/transformers/models/*/modeling_*.py parsed with Python's ast.",
        f"// Regenerate: {cmd} --out rules/config/ModelTable.generated.inc",
        "// Row: family (models/<dir>), hub id patterns, class-name prefix (written `~` in the lists below),",
        "// _no_split_modules layer classes, PreTrainedModel classes, other classes, families it imports",
        "// classes from, why its class set is open (what it builds sub-models with; \"\": closed).",
        "// clang-format off",
        f'constexpr std::string_view kTransformersVersion = "{version}";',
        f'constexpr std::string_view kTransformersSource = "{where}";',
        "constexpr std::string_view kSharedClasses =",
        f"    {cxx_str(sorted(shared))};",
        "constexpr GeneratedFamily kGeneratedFamilies[] = {",
    ]
    for name in sorted(families):
        f = families[name]
        pre = class_prefix(f)
        cols = [cxx_str([name]), cxx_str(id_patterns(name)), cxx_str([pre]), cxx_str(abbreviate(f["layers"], pre)),
                cxx_str(abbreviate(f["archs"], pre)), cxx_str(abbreviate(f["classes"], pre)), cxx_str(f["deps"]),
                cxx_str([f["open"]] if f["open"] else [])]
        lines.append("{" + ",".join(cols) + "},")
    lines += ["};", "// clang-format on", ""]
    text = "\n".join(lines)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"{len(families)} families, {sum(len(f['layers']) + len(f['archs']) + len(f['classes']) for f in families.values())}"
              f" class names, {len(text)} bytes -> {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
