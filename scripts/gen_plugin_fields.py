#!/usr/bin/env python3
"""Generate rules/fsdp/PluginFields.generated.inc, SL403's table of accelerate's FSDP plugin names.

For every accelerate release read, the table records the names an instance of
`FullyShardedDataParallelPlugin` (src/accelerate/utils/dataclasses.py) has:
  - field:     a dataclass field (an annotated name in the class body);
  - method:    a function defined in the class body (`set_auto_wrap_policy`, `__post_init__`, ...);
  - property:  a function decorated with @property (or `@x.setter`);
  - attribute: a plain class-level assignment, or `self.NAME = ...` in a method of the class.
Members of base classes defined in the same file are included (the class has had no base so far).
Each name is written with the releases that have it, as runs of consecutive releases of the
ordered list of versions read (`0.20.0-0.34.2,1.0.0`).

Sources:
  --git-dir DIR   a clone of huggingface/accelerate with its release tags; every tag vX.Y.Z (no
                  release candidates) whose dataclasses.py defines the class is read.
  --src DIR=VER   an accelerate package directory (an installed `accelerate/`) or a source tree (with
                  src/accelerate/), read as release VER (repeatable; e.g. a newer install than the tags).

Only the standard library is used; the source is parsed with `ast`.

Usage (from the repository root):
  python3 scripts/gen_plugin_fields.py --git-dir ACCELERATE/.git \
      --src /path/to/site-packages/accelerate=1.15.0 --out rules/fsdp/PluginFields.generated.inc
"""
import argparse
import ast
import os
import re
import subprocess
import sys

CLASS = "FullyShardedDataParallelPlugin"
PATH_IN_REPO = "src/accelerate/utils/dataclasses.py"
TAG = re.compile(r"^v(\d+)\.(\d+)\.(\d+)$")


def version_key(v):
    return tuple(int(x) for x in v.split("."))


def members(tree):
    """name -> kind for the class (and bases defined in the same file), or None when absent."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    if CLASS not in classes:
        return None
    out = {}

    def visit(cls, seen):
        if cls.name in seen:
            return
        seen.add(cls.name)
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id in classes:
                visit(classes[base.id], seen)
        for s in cls.body:
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
                out[s.target.id] = "field"
            elif isinstance(s, ast.Assign):
                for t in s.targets:
                    if isinstance(t, ast.Name):
                        out.setdefault(t.id, "attribute")
            elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                prop = any(
                    (isinstance(d, ast.Name) and d.id in ("property", "cached_property"))
                    or (isinstance(d, ast.Attribute) and d.attr in ("setter", "getter", "deleter", "cached_property"))
                    for d in s.decorator_list)
                out[s.name] = "property" if prop else "method"
                for node in ast.walk(s):
                    if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                            and isinstance(node.value, ast.Name) and node.value.id == "self"):
                        out.setdefault(node.attr, "attribute")

    visit(classes[CLASS], set())
    return out


def git(git_dir, *args):
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True, capture_output=True, text=True).stdout


def read_git(git_dir):
    found = []
    for tag in git(git_dir, "tag", "--list").split():
        if not TAG.match(tag):
            continue
        try:
            text = git(git_dir, "show", f"{tag}:{PATH_IN_REPO}")
        except subprocess.CalledProcessError:
            continue
        m = members(ast.parse(text))
        if m is None:
            continue
        commit = git(git_dir, "rev-parse", f"{tag}^{{commit}}").strip()
        found.append((tag[1:], f"tag {tag} (commit {commit[:12]})", m))
    return found


def read_src(spec):
    directory, _, version = spec.rpartition("=")
    if not directory or not re.match(r"^\d+\.\d+\.\d+$", version):
        sys.exit(f"--src wants DIR=X.Y.Z, got {spec!r}")
    for candidate in ("utils/dataclasses.py", PATH_IN_REPO):
        path = os.path.join(directory, candidate)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                m = members(ast.parse(f.read()))
            if m is None:
                sys.exit(f"{path} does not define {CLASS}")
            return (version, f"an installed accelerate {version} (utils/dataclasses.py)", m)
    sys.exit(f"no accelerate dataclasses.py under {directory}")


def runs(indexes, versions):
    out, start, prev = [], None, None
    for i in indexes:
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            out.append((start, prev))
            start = prev = i
    if start is not None:
        out.append((start, prev))
    return ",".join(versions[a] if a == b else f"{versions[a]}-{versions[b]}" for a, b in out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--git-dir")
    ap.add_argument("--src", action="append", default=[])
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    read = read_git(a.git_dir) if a.git_dir else []
    for spec in a.src:
        read.append(read_src(spec))
    by_version = {}
    for v, source, m in read:  # a --src of a tagged version replaces the tag
        by_version[v] = (source, m)
    versions = sorted(by_version, key=version_key)
    if not versions:
        sys.exit("nothing read")
    names = {}
    for i, v in enumerate(versions):
        for name, kind in by_version[v][1].items():
            names.setdefault(name, {})[i] = kind
    lines = [
        "// GENERATED by scripts/gen_plugin_fields.py. Do not edit by hand.",
        f"// Source: huggingface/accelerate {PATH_IN_REPO}, class {CLASS}, parsed with Python's ast, at",
        f"// {len(versions)} releases: "
        + "; ".join(f"{v}: {by_version[v][0]}" for v in versions if not by_version[v][0].startswith("tag "))
        + ("; " if any(not by_version[v][0].startswith("tag ") for v in versions) else "")
        + "every other one: its release tag (git, tags vX.Y.Z, no release candidates).",
        "// Regenerate: python3 scripts/gen_plugin_fields.py --git-dir ACCELERATE_GIT_DIR"
        + "".join(f" --src DIR={v}" for v in versions if not by_version[v][0].startswith("tag "))
        + " --out rules/fsdp/PluginFields.generated.inc",
        "// Row: name, kind (field / method / property / attribute: the kind in the newest release that has it),",
        "// the releases that have it (runs of consecutive releases of kPluginVersions).",
        "// clang-format off",
        "constexpr std::string_view kPluginVersions[] = {",
    ]
    for k in range(0, len(versions), 10):
        lines.append("    " + " ".join(f'"{v}",' for v in versions[k:k + 10]))
    lines.append("};")
    tagged = [f"{v}={by_version[v][0].split('(commit ')[1][:-1]}" for v in versions if by_version[v][0].startswith("tag ")]
    lines.append("// Release tags read, with their commits:")
    for k in range(0, len(tagged), 6):
        lines.append("//   " + " ".join(tagged[k:k + 6]))
    lines.append("constexpr GeneratedPluginName kPluginNames[] = {")
    for name in sorted(names):
        idx = sorted(names[name])
        kind = names[name][idx[-1]]
        lines.append(f'{{"{name}","{kind}","{runs(idx, versions)}"}},')
    lines.append("};")
    lines.append("// clang-format on")
    with open(a.out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{a.out}: {len(names)} names over {len(versions)} releases ({versions[0]} to {versions[-1]})")


if __name__ == "__main__":
    main()
