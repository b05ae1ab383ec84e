#!/usr/bin/env python3
"""Parser differential: valid Python must never get SL001.

Walks a set of corpora, keeps the `.py` files that CPython's `ast.parse` accepts, asks
`shardlint parse-check` (hidden subcommand: SL001/SL002 only, no pre-scan, no analysis, no size
limit) about them in batches, and reports every accepted file that shardlint does not parse
completely, with the first error's line/column and the source line.

    python3 scripts/parse_diff.py                    # default corpora (see --help)
    python3 scripts/parse_diff.py --all-pythons      # plus other installed interpreters' stdlib and packages
    python3 scripts/parse_diff.py --corpus mine=path/to/tree --no-defaults
    python3 scripts/parse_diff.py --synthetic --no-defaults   # generated expression-in-context snippets

`ast.parse` runs in the interpreter that owns the corpus (the running python3 for the default
ones; `--all-pythons` judges each pyenv interpreter's files with that interpreter), so the grammar
checked is that interpreter's. Files ast.parse rejects (lib2to3 and test data that are meant to be
bad, Python 2 code) drop out. A disagreement that `compile()` also rejects (a compile-time check
such as `from __future__ import *`) is marked: Python would not run that file either.
`ast.parse(feature_version=...)` is not used: it is best effort inside one interpreter's parser,
while judging each interpreter's files with that interpreter is exact.

Files shardlint skips with SL002 (not UTF-8: a PEP 263 coding declaration) are listed apart; they
never get SL001. Exit status 1 when a file gets SL001 that compile() accepts (a false SL001).

Developer tool, not run in CI: the corpora depend on the machine. Standard library only.
"""

import argparse
import concurrent.futures
import hashlib
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Runs in the judging interpreter (any Python 3): reads "MODE\n" then paths from stdin, prints one
# verdict per path: "1" accepted, "0" rejected. MODE "ast": ast.parse; "compile": compile to bytecode.
JUDGE = r"""
import ast, sys, warnings
warnings.simplefilter("ignore")
sys.setrecursionlimit(10000)
mode = sys.stdin.readline().strip()
out = []
for line in sys.stdin:
    path = line.rstrip("\n")
    try:
        with open(path, "rb") as f:
            src = f.read()
        if mode == "ast":
            ast.parse(src, path)
        else:
            compile(src, path, "exec", dont_inherit=True)
        out.append("1")
    except BaseException:
        out.append("0")
sys.stdout.write("\n".join(out) + ("\n" if out else ""))
"""


def python_version(exe):
    r = subprocess.run([exe, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                       capture_output=True, text=True, check=True)
    return r.stdout.strip()


def judge(exe, paths, mode, jobs):
    """Verdicts (True = accepted) of `exe` for `paths`, in order; `jobs` interpreters in parallel."""
    if not paths:
        return []
    n = max(1, min(jobs, len(paths) // 200 + 1))
    chunks = [paths[i::n] for i in range(n)]

    def run(chunk):
        r = subprocess.run([exe, "-c", JUDGE], input=mode + "\n" + "\n".join(chunk) + "\n",
                           capture_output=True, text=True, errors="surrogateescape")
        verdicts = r.stdout.split()
        if r.returncode != 0 or len(verdicts) != len(chunk):
            raise RuntimeError(f"{exe} failed judging {len(chunk)} files: {r.stderr[-2000:]}")
        return [v == "1" for v in verdicts]

    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        results = list(pool.map(run, chunks))
    out = [None] * len(paths)
    for i, res in enumerate(results):
        out[i::n] = res
    return out


def walk_py(roots, exclude_dirs=()):
    exclude = {os.path.realpath(d) for d in exclude_dirs}
    files = []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if os.path.realpath(os.path.join(dirpath, d)) not in exclude)
            for name in sorted(filenames):
                if name.endswith(".py"):
                    p = os.path.join(dirpath, name)
                    if os.path.isfile(p):
                        files.append(p)
    return files


def parse_check(shardlint, paths, jobs, batch):
    """path -> parse-check record. A batch whose run dies is split until the file that kills it is
    found; that file gets status "crash"."""
    results = {}

    def run(chunk):
        r = subprocess.run([shardlint, "parse-check", "-j", str(jobs), "--files-from", "-"],
                           input="\n".join(chunk) + "\n", capture_output=True, text=True, errors="surrogateescape")
        lines = r.stdout.splitlines()
        if r.returncode in (0, 1) and len(lines) == len(chunk):
            for line in lines:
                rec = json.loads(line)
                results[rec["path"]] = rec
            return
        if len(chunk) == 1:
            results[chunk[0]] = {"path": chunk[0], "status": "crash",
                                 "message": f"parse-check exited {r.returncode}: {r.stderr.strip()[-300:]}"}
            return
        mid = len(chunk) // 2
        run(chunk[:mid])
        run(chunk[mid:])

    for i in range(0, len(paths), batch):
        run(paths[i:i + batch])
    return results


def source_line(path, line):
    try:
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
    except OSError:
        return ""
    if not 1 <= line <= len(lines):
        return ""
    text = lines[line - 1].decode("utf-8", "replace").rstrip("\r")
    # Show control characters (form feed, lone CR, ...) instead of printing them.
    return "".join(c if c == "\t" or c >= " " else repr(c)[1:-1] for c in text)[:200]


def default_corpora(args):
    corpora = []
    stdlib = sysconfig.get_paths()["stdlib"]
    site_dirs = []
    try:
        import site
        site_dirs = [d for d in site.getsitepackages() + [site.getusersitepackages()] if os.path.isdir(d)]
    except Exception:
        pass
    corpora.append(("stdlib", [stdlib], sys.executable,
                    [os.path.join(stdlib, "site-packages"), os.path.join(stdlib, "dist-packages")] + site_dirs))
    if site_dirs:
        corpora.append(("site-packages", site_dirs, sys.executable, []))
    if os.path.isdir("/usr/lib/python3/dist-packages"):
        corpora.append(("dist-packages", ["/usr/lib/python3/dist-packages"], sys.executable, []))
    if args.eco and os.path.isdir(args.eco):
        for name in sorted(os.listdir(args.eco)):
            d = os.path.join(args.eco, name)
            if os.path.isdir(d):
                corpora.append(("eco/" + name, [d], sys.executable, []))
    return corpora


def other_pythons():
    """Other installed interpreters (pyenv versions 3.8+ besides the running one): their stdlib and
    site-packages, judged by that interpreter."""
    found = []
    pyenv = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    versions = os.path.join(pyenv, "versions")
    if not os.path.isdir(versions):
        return found
    me = os.path.realpath(sys.executable)
    for v in sorted(os.listdir(versions)):
        exe = os.path.join(versions, v, "bin", "python3")
        if not os.path.exists(exe) or os.path.realpath(exe) == me:
            continue
        try:
            info = json.loads(subprocess.run(
                [exe, "-c", "import sys, sysconfig, json; print(json.dumps([sys.version_info[:2], "
                            "sysconfig.get_paths()['stdlib'], sysconfig.get_paths()['purelib']]))"],
                capture_output=True, text=True, check=True).stdout)
        except (subprocess.CalledProcessError, ValueError):
            continue
        (major, minor), stdlib, purelib = info
        if (major, minor) < (3, 8):
            continue
        found.append((f"stdlib-{major}.{minor}", [stdlib], exe, [purelib, os.path.join(stdlib, "site-packages")]))
        if os.path.isdir(purelib):
            found.append((f"site-packages-{major}.{minor}", [purelib], exe, []))
    return found


# --synthetic: every expression form in every context, written as tiny files (the snippet is the
# minimal construct). Those ast.parse rejects drop out like any other file.
SYNTH_FORMS = [
    "a", "1", "1.5", "1j", "0x_1", '"s"', 'f"{a}"', 'rb"x"', '"a" "b"', "...", "None", "[1]", "(1,)", "()",
    "{1}", "{1: 2}", "(a)", "a.b", "a[0]", "f()", "a[1:2]", "a[::]", "a[:, 1]", "a[*b]", "a[b:=1]",
    "lambda: 0", "lambda *a, **k: 0", "lambda a, /, b: 0", "(yield)", "not a", "-a", "~a", "a if b else c",
    "(x := 1)", "x := 1", "a + b", "a ** b", "a @ b", "a < b < c", "a is not b", "a not in b", "a and b",
    "await a", "[x for x in y]", "(x for x in y)", "{x: y for x in y}", "*a", "*a.b", "*f()", "*[1]",
    "*(a)", '*"s"', "**a", "yield a", "yield from a", "print", "exec", "match", "case", "type", "_",
    "f(*a, **k)", "f(a=1)", "f(x for x in y)",
]
SYNTH_CONTEXTS = {
    "statement": "async def g():\n    {e}\n",
    "assign": "async def g():\n    x = {e}\n",
    "assign_tuple": "async def g():\n    x = {e}, 1\n",
    "chained_assign": "async def g():\n    x = y = {e}\n",
    "augmented": "async def g():\n    x += {e}\n",
    "annotated": "async def g():\n    x: int = {e}\n",
    "target": "async def g():\n    {e} = 1\n",
    "starred_target": "async def g():\n    *{e}, b = c\n",
    "for_target": "async def g():\n    for {e} in y: pass\n",
    "return": "async def g():\n    return {e}\n",
    "return_tuple": "async def g():\n    return {e}, 1\n",
    "yield_tuple": "def g():\n    yield {e}, 1\n",
    "for_iterable": "async def g():\n    for x in {e}, 1: pass\n",
    "call_argument": "async def g():\n    f(1, {e})\n",
    "keyword_argument": "async def g():\n    f(k={e})\n",
    "list_element": "async def g():\n    [{e}]\n",
    "dict_value": "async def g():\n    {{1: {e}}}\n",
    "subscript": "async def g():\n    a[{e}]\n",
    "subscript_tuple": "async def g():\n    a[{e}, 1]\n",
    "slice": "async def g():\n    a[{e}:{e}]\n",
    "condition": "async def g():\n    if {e}: pass\n",
    "lambda_body": "async def g():\n    h = lambda: {e}\n",
    "fstring_field": 'async def g():\n    s = f"{{{e}}}"\n',
    "fstring_spec": 'async def g():\n    s = f"{{a:{{{e}}}}}"\n',
    "decorator": "@{e}\ndef h(): pass\n",
    "with_item": "async def g():\n    with {e} as z: pass\n",
    "default": "def h(x={e}): pass\n",
    "parameter_annotation": "def h(x: {e}): pass\n",
    "return_annotation": "def h() -> {e}: pass\n",
    "star_annotation": "def h(*a: {e}): pass\n",
    "variable_annotation": "x: {e}\n",
    "comprehension_iterable": "async def g():\n    [x for x in {e}]\n",
    "except_type": "try:\n    pass\nexcept {e}:\n    pass\n",
    "match_subject": "match {e}:\n    case _:\n        pass\n",
    "match_guard": "match x:\n    case _ if {e}:\n        pass\n",
    "class_base": "class C({e}): pass\n",
    "type_alias": "type X = {e}\n",
    "type_parameter_bound": "def h[T: {e}](): pass\n",
    "raise_from": "async def g():\n    raise a from {e}\n",
    "del": "async def g():\n    del {e}\n",
}


def write_synthetic(folder):
    for cname, template in SYNTH_CONTEXTS.items():
        for i, form in enumerate(SYNTH_FORMS):
            src = template.replace("{e}", "\0").replace("{{", "{").replace("}}", "}").replace("\0", form)
            with open(os.path.join(folder, f"{cname}__{i:02d}.py"), "w", encoding="utf-8") as f:
                f.write(src)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shardlint", default=os.path.join(ROOT, "build", "shardlint"))
    ap.add_argument("--eco", default="/work/eco-cache",
                    help="folder of ecosystem checkouts, one corpus per subfolder (default: %(default)s)")
    ap.add_argument("--corpus", action="append", default=[], metavar="NAME=PATH",
                    help="an extra corpus, judged by the running python3 (repeatable)")
    ap.add_argument("--no-defaults", action="store_true", help="only the corpora given with --corpus")
    ap.add_argument("--all-pythons", action="store_true",
                    help="also every other pyenv interpreter (3.8+): its stdlib and site-packages, judged by it")
    ap.add_argument("--synthetic", action="store_true",
                    help="also a generated corpus: %d expression forms in %d contexts, one tiny file each"
                         % (len(SYNTH_FORMS), len(SYNTH_CONTEXTS)))
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--batch", type=int, default=2000, help="files per shardlint parse-check run")
    ap.add_argument("--json", metavar="FILE", help="write the per-corpus figures and every disagreement as JSON")
    args = ap.parse_args()

    if not os.access(args.shardlint, os.X_OK):
        sys.exit(f"parse_diff: no shardlint binary at {args.shardlint} (build it, or pass --shardlint)")
    probe = subprocess.run([args.shardlint, "parse-check"], capture_output=True, text=True)
    if probe.returncode != 0:
        sys.exit(f"parse_diff: {args.shardlint} has no parse-check subcommand (rebuild it): {probe.stderr.strip()}")
    corpora = [] if args.no_defaults else default_corpora(args)
    for spec in args.corpus:
        name, _, path = spec.partition("=")
        if not path:
            sys.exit(f"parse_diff: --corpus takes NAME=PATH, got {spec!r}")
        corpora.append((name, [path], sys.executable, []))
    if args.all_pythons:
        corpora += other_pythons()
    synthetic = tempfile.TemporaryDirectory(prefix="parse-diff-synthetic-")
    if args.synthetic:
        write_synthetic(synthetic.name)
        corpora.append(("synthetic", [synthetic.name], sys.executable, []))

    t0 = time.monotonic()
    seen = set()  # real paths already checked by an earlier corpus
    figures, disagreements = [], []
    versions = {}
    for name, roots, exe, exclude in corpora:
        version = versions.setdefault(exe, python_version(exe))
        files = []
        for p in walk_py(roots, exclude):
            rp = os.path.realpath(p)
            if rp not in seen:
                seen.add(rp)
                files.append(p)
        accepted = [p for p, ok in zip(files, judge(exe, files, "ast", args.jobs)) if ok]
        results = parse_check(args.shardlint, accepted, args.jobs, args.batch)
        by_status = {}
        bad = []
        for p in accepted:
            rec = results[p]
            by_status[rec["status"]] = by_status.get(rec["status"], 0) + 1
            if rec["status"] != "ok":
                bad.append(rec)
        compiles = judge(exe, [r["path"] for r in bad], "compile", 1)
        for rec, comp in zip(bad, compiles):
            rec["corpus"] = name
            rec["python"] = version
            rec["compile_accepts"] = comp
            if rec["status"] == "SL001":
                rec["source"] = source_line(rec["path"], rec["line"])
            with open(rec["path"], "rb") as f:
                rec["sha1"] = hashlib.sha1(f.read()).hexdigest()
            disagreements.append(rec)
        fig = {"corpus": name, "python": version, "roots": roots, "files": len(files), "accepted": len(accepted),
               "ok": by_status.get("ok", 0), "sl001": by_status.get("SL001", 0), "sl002": by_status.get("SL002", 0),
               "other": sum(v for k, v in by_status.items() if k not in ("ok", "SL001", "SL002"))}
        figures.append(fig)
        print(f"{name:<24} python {version:<8} {fig['files']:>6} .py files, {fig['accepted']:>6} accepted by ast.parse, "
              f"{fig['ok']:>6} parse completely, {fig['sl001']} SL001, {fig['sl002']} SL002, {fig['other']} other",
              flush=True)

    total = {k: sum(f[k] for f in figures) for k in ("files", "accepted", "ok", "sl001", "sl002", "other")}
    print(f"{'total':<24} {'':<15} {total['files']:>6} .py files, {total['accepted']:>6} accepted by ast.parse, "
          f"{total['ok']:>6} parse completely, {total['sl001']} SL001, {total['sl002']} SL002, {total['other']} other"
          f"  ({time.monotonic() - t0:.0f} s)")
    sl001 = [d for d in disagreements if d["status"] == "SL001"]
    rest = [d for d in disagreements if d["status"] != "SL001"]
    if sl001:
        false_sl001 = sum(1 for d in sl001 if d["compile_accepts"])
        print(f"\n{len(sl001)} files get SL001 although ast.parse accepts them "
              f"({len({d['sha1'] for d in sl001})} distinct contents; compile() accepts {false_sl001}):")
        for d in sl001:
            note = "" if d["compile_accepts"] else "  [compile() rejects it too]"
            print(f"{d['path']}:{d['line']}:{d['column']}: [{d['corpus']}, python {d['python']}]{note}\n"
                  f"    {d['message']}\n    | {d['source']}")
    if rest:
        print(f"\n{len(rest)} files ast.parse accepts that shardlint does not parse at all (SL002 and others):")
        for d in rest:
            print(f"{d['path']}: {d['status']} [{d['corpus']}, python {d['python']}]: {d['message']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"figures": figures, "total": total, "disagreements": disagreements}, f, indent=1)
    synthetic.cleanup()
    return 1 if any(d["compile_accepts"] for d in sl001) else 0


if __name__ == "__main__":
    sys.exit(main())
