#!/usr/bin/env python3
"""The editor's incremental analysis on real files: after each edit, `shardlint server` must publish exactly
the diagnostics that a fresh server publishes for the same text.

The language server carries the summaries of the functions an edit left unchanged over to the next lint
(analyzer/driver/ModuleTableCarry.cpp). A summary kept when it should not be shows here as a difference. For
each sampled file of each checkout, one server opens the file and applies a fixed series of edits: a
character typed into code and deleted again, a comment edited, a statement line added in a function body,
and a line removed, each sent as the one ranged change an editor sends (so that the incremental parse and
the moving of findings over a comment edit, analyzer/lsp/ServerComments.cpp, are what is checked). After each
edit it waits until the server has published its last diagnostics for the
version. A new server process then opens the same text, and its settled diagnostics are compared with the
first server's.

Usage: ecosystem/editor_check.py --cache /work/eco-cache [--repo torchtitan ...] [--sample 8] [--largest 2]
       [--scripts 2]
Exit status: 0 when every state agrees, 1 when some differ (each difference is printed), 2 on a usage error
or a server that failed.
"""
import argparse
import ast
import os
import pathlib
import re
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scripts" / "bench"))

import lsp_latency  # noqa: E402  (sample_files, edit sites)
from lsp_client import Client  # noqa: E402

WAIT_S = 120
MAIN_GUARD = re.compile(r"""^if __name__ == ["']__main__["']:""")
MAIN_CALL = re.compile(r"^[ \t]+main\(")


def calls_main(text):
    """Whether the module body calls `main()` under `if __name__ == "__main__":` (an edit inside main is where
    the analysis runs main directly, semantic/FileAnalysis.cpp)."""
    guarded = False
    for line in text.split("\n"):
        if MAIN_GUARD.match(line):
            guarded = True
        elif guarded and line.strip() and not line[0].isspace():
            guarded = False
        elif guarded and MAIN_CALL.match(line):
            return True
    return False
SETTLE_S = 0.6  # no publish for this long: the background passes are done


def main_edit_site(text):
    """lsp_latency.code_edit_site within the body of the module's `def main(`, on the file's lines; None when
    there is no such function or line."""
    lines = text.split("\n")
    start = next((i for i, l in enumerate(lines) if l.startswith("def main(")), None)
    if start is None:
        return None
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end][0].isspace()):
        end += 1
    site = lsp_latency.code_edit_site("\n".join(lines[start + 1:end]))
    return (site[0] + start + 1, site[1]) if site else None


def states(text):
    """[(what, text)]: the texts the edits leave, in order."""
    lines = text.split("\n")
    out = []
    code = main_edit_site(text) if calls_main(text) else None
    code = code or lsp_latency.code_edit_site(text)
    if code:
        i, ch = code
        line = lines[i]
        # (code_edit_site counts UTF-16 units; its lines have no quotes or comments, and rarely non-ASCII)
        typed = line[:ch] + "_" + line[ch:]
        out.append(("code: a character typed", "\n".join(lines[:i] + [typed] + lines[i + 1:])))
        out.append(("code: the character deleted", text))
        indent = line[:len(line) - len(line.lstrip(" \t"))]
        out.append(("code: a statement line added after it",
                    "\n".join(lines[:i + 1] + [indent + "_edited = 0"] + lines[i + 1:])))
    ci, cch = lsp_latency.edit_site(text)
    base = out[-1][1] if out else text
    blines = base.split("\n")
    shift = 1 if code and ci > code[0] else 0
    ci += shift
    if ci < len(blines):
        orig = blines[ci]
        blines[ci] = orig[:cch] + " edited" + orig[cch:]
        out.append(("comment: words typed", "\n".join(blines)))
        blines[ci] = orig
        out.append(("comment: the words deleted", "\n".join(blines)))
        blines[ci] = orig[:cch] + " \u00e9 \U0001F680 fully_shard(model) # noqa" + orig[cch:]
        out.append(("comment: pre-scan words, a directive and non-ASCII typed", "\n".join(blines)))
        blines[ci] = orig[:cch] + " \u00e9 \U0001F680 fully_shard(model)" + orig[cch:]
        out.append(("comment: the directive deleted", "\n".join(blines)))
        blines[ci] = orig[:cch] + " \u00e9 \U0001F680 edited" + orig[cch:]
        out.append(("comment: the pre-scan words replaced", "\n".join(blines)))
    doc = docstring_site(text)  # (the texts edited so far may not parse: the added line can be in brackets)
    if doc:
        cur = (out[-1][1] if out else text).split("\n")
        i, ch = doc
        i += 1 if code and i > code[0] else 0
        cur[i] = cur[i][:ch] + "Edited, " + cur[i][ch:]
        out.append(("docstring: words typed", "\n".join(cur)))
    if code:
        cur = out[-1][1].split("\n")
        out.append(("code: the line removed", "\n".join(cur[:code[0]] + cur[code[0] + 1:])))
    return out


def docstring_site(text):
    """(line, character) just inside the opening quotes of the first function's or class's docstring (no string
    prefix), or None."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    lines = text.split("\n")
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or not node.body:
            continue
        first = node.body[0]
        if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)):
            continue
        line = lines[first.lineno - 1]
        ch = len(line.encode("utf-8")[:first.col_offset].decode("utf-8", "replace"))
        for quote in ('"""', "'''", '"', "'"):
            if line.startswith(quote, ch):
                return first.lineno - 1, ch + len(quote)
        return None
    return None


def settled(client, uri, version):
    """The diagnostics of `version` once the server has stopped publishing them."""
    last = None
    deadline = time.time() + WAIT_S
    while time.time() < deadline:
        try:
            _, msg = client.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                                 and m["params"].get("uri") == uri, "diagnostics", SETTLE_S if last is not None else WAIT_S)
        except SystemExit:
            if last is not None:
                return last
            raise
        if msg["params"].get("version") == version:
            last = sorted((d["range"]["start"]["line"], d["range"]["start"]["character"], d["range"]["end"]["line"],
                           d["range"]["end"]["character"], d.get("code", ""), d["message"])
                          for d in msg["params"]["diagnostics"])
    return last


def start(binary, root, trace=False):
    client = Client([binary, "server"], WAIT_S, trace=trace)
    client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"processId": os.getpid(), "rootUri": pathlib.Path(root).as_uri(), "capabilities": {}}})
    client.wait(lambda m: m.get("id") == 1, "the initialize response", WAIT_S)
    client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    return client


def stop(client):
    try:
        client.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
        client.wait(lambda m: m.get("id") == 2, "the shutdown response", WAIT_S)
        client.send({"jsonrpc": "2.0", "method": "exit"})
        client.proc.wait(timeout=WAIT_S)
    finally:
        if client.proc.poll() is None:
            client.proc.kill()


def ranged_change(old, new):
    """The LSP change that turns `old` into `new`: one range (UTF-16 positions) around the bytes that differ,
    or the whole document when the text has carriage returns (LSP counts them as line breaks)."""
    if "\r" in old or "\r" in new:
        return {"text": new}
    p = 0
    n = min(len(old), len(new))
    while p < n and old[p] == new[p]:
        p += 1
    s = 0
    while s < n - p and old[len(old) - 1 - s] == new[len(new) - 1 - s]:
        s += 1

    def position(i):
        line = old.count("\n", 0, i)
        start = old.rfind("\n", 0, i) + 1
        return {"line": line, "character": lsp_latency.utf16_len(old[start:i])}

    return {"range": {"start": position(p), "end": position(len(old) - s)}, "text": new[p:len(new) - s]}


def fresh(binary, root, uri, text):
    client = start(binary, root)
    try:
        client.send({"jsonrpc": "2.0", "method": "textDocument/didOpen",
                     "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}})
        return settled(client, uri, 1)
    finally:
        stop(client)


def check_file(binary, root, path, text):
    """[(what, carried, fresh)] for the states that differ, the number of states compared, the summaries
    and analysis arms carried over and the functions run directly (all lints of the edited server)."""
    uri = pathlib.Path(path).as_uri()
    diffs = []
    client = start(binary, root, trace=True)
    try:
        client.send({"jsonrpc": "2.0", "method": "textDocument/didOpen",
                     "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}})
        settled(client, uri, 1)
        seq = states(text)
        cur = text
        for v, (what, new) in enumerate(seq, start=2):
            client.send({"jsonrpc": "2.0", "method": "textDocument/didChange",
                         "params": {"textDocument": {"uri": uri, "version": v},
                                    "contentChanges": [ranged_change(cur, new)]}})
            cur = new
            got = settled(client, uri, v)
            want = fresh(binary, root, uri, new)
            if got != want:
                diffs.append((what, got, want))
    finally:
        stop(client)
    return diffs, len(seq), sum(client.carried), sum(client.arms), sum(client.direct)


def files(root, args):
    """[(path, text)]: the sampled files of a checkout, its largest ones and its largest scripts."""
    picked = [(p, t) for p, t, _ in lsp_latency.sample_files(root, args.sample, args.seed, args.largest)]
    if args.scripts:
        seen = {p for p, _ in picked}
        scripts = [(p, t) for p, t, _ in lsp_latency.sample_files(root, 10**9, args.seed)
                   if p not in seen and t.count("\n") + 1 <= 5000 and calls_main(t)]
        scripts.sort(key=lambda c: (-(c[1].count("\n") + 1), c[0]))
        picked += scripts[:args.scripts]
    return sorted(picked)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", required=True, help="the folder of the ecosystem checkouts (CACHE/NAME/)")
    ap.add_argument("--repo", action="append", help="checkouts to use (default: torchtitan, accelerate, composer, "
                                                    "pytorch-lightning)")
    ap.add_argument("--sample", type=int, default=6, help="files sampled per checkout")
    ap.add_argument("--largest", type=int, default=2, help="the largest files added per checkout")
    ap.add_argument("--scripts", type=int, default=2, help="the largest scripts (up to 5,000 lines) whose module "
                                                           "body calls main() added per checkout")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shardlint", default=str(HERE.parent / "build" / "shardlint"))
    args = ap.parse_args()
    repos = args.repo or ["torchtitan", "accelerate", "composer", "pytorch-lightning"]
    bad = 0
    compared = 0
    carried = 0
    arms = 0
    direct = 0
    for name in repos:
        root = os.path.join(args.cache, name)
        if not os.path.isdir(root):
            print(f"editor_check: no checkout {root}", file=sys.stderr)
            return 2
        for path, text in files(root, args):
            rel = os.path.relpath(path, root)
            try:
                diffs, n, c, a, r = check_file(args.shardlint, root, path, text)
            except SystemExit as e:
                print(f"editor_check: {name}/{rel}: {e}", file=sys.stderr)
                return 2
            compared += n
            carried += c
            arms += a
            direct += r
            for what, got, want in diffs:
                bad += 1
                print(f"DIFFERS {name}/{rel} after {what}:")
                for d in sorted(set(got or []) - set(want or [])):
                    print(f"  only after the edits: {d}")
                for d in sorted(set(want or []) - set(got or [])):
                    print(f"  only in a fresh server: {d}")
            print(f"{name}/{rel}: {n} states, {len(diffs)} differ, {c} summaries and {a} arms carried over, "
                  f"{r} functions run directly", file=sys.stderr, flush=True)
    print(f"{'OK' if not bad else 'FAILED'}: {compared} edited states compared, {bad} differ "
          f"({carried} summaries and {arms} arms carried over, {direct} functions run directly)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
