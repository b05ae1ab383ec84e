#!/usr/bin/env python3
"""Edit -> publishDiagnostics latency of `shardlint server` (Python 3 standard library only).

Starts `build/shardlint server`, opens a generated 5,000-line FSDP training script (an SL101 bug
near the end, classes and helper functions before it), sends one-character incremental edits
(each waits for the diagnostics of its version) and prints the latency of each step: the time
from writing the didChange to reading the matching textDocument/publishDiagnostics.

    scripts/bench/lsp_latency.py [--binary build/shardlint] [--lines 5000] [--edits 50]

Corpus mode: real files of one or more checkouts (e.g. /work/eco-cache/torchtitan). For each
DIR, one server is started with DIR as its workspace root (rootUri); a deterministic sample of
DIR's .py files (fixed seed; about two thirds mention an optimizer, FSDP / fully_shard or
prepare, so the analysis really runs, the rest are drawn from the other files) is opened one
at a time, edited with one-character edits (a space typed after the `#` of a comment, or at the
end of the file, then deleted again: the findings do not change) and closed. Prints p50, p95
and max per checkout and the slowest files; --json writes the same for scripts/bench/run.sh.
The files on disk are only read.

    scripts/bench/lsp_latency.py --corpus DIR [--corpus DIR...] [--sample 30] [--edits-per-file 4]
                                 [--largest 3] [--edit-kind comment|code|both] [--seed 12] [--json FILE]

--largest adds the checkout's largest files (up to 5,000 lines: issue 34's editor goal covers every file up
to that size) to the sample; --edit-kind code types `_` after an identifier in the code line nearest the
middle of the file (then deletes it), so the analysis really changes, not only a comment.

The server runs with SHARDLINT_LSP_TRACE=1, which makes it print the time of each parse and
lint to stderr; the table splits the latency into incremental parse, lint (the analysis
engine) and the rest (protocol, JSON, pipes). Not part of the test suite (no timed tests).
"""
import re
import argparse
import json
import os
import pathlib
import random
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WAIT_S = 10.0
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (shardlint's discovery rules)
from lsp_client import Client  # noqa: E402


def generate(lines):
    """A training script of exactly `lines` lines: model blocks and helpers, then main() with SL101."""
    out = ['"""Generated FSDP training script for the shardlint LSP latency benchmark."""',
           "import os", "import torch", "import torch.distributed as dist", "import torch.nn as nn",
           "import torch.nn.functional as F",
           "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP", "", ""]
    i = 0
    while len(out) < lines - 40:
        out += [f"class Block{i}(nn.Module):",
                f"    def __init__(self, dim={64 + i % 7}):",
                "        super().__init__()",
                "        self.proj = nn.Linear(dim, dim)",
                "        self.norm = nn.LayerNorm(dim)",
                "",
                "    def forward(self, x):",
                "        y = self.proj(self.norm(x))",
                "        return F.gelu(y) + x",
                "",
                "",
                f"def helper_{i}(values, scale=1.0):",
                "    total = 0.0",
                "    for v in values:",
                "        if v > 0:",
                "            total += v * scale",
                "        else:",
                "            total -= v",
                "    return total",
                "",
                ""]
        i += 1
    out += ["def main():",
            '    dist.init_process_group("nccl")',
            "    model = nn.Sequential(Block0(), Block1())",
            "    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)",
            "    model = FSDP(model)",
            "    for step in range(10):",
            "        loss = model(torch.randn(8, 64)).sum()",
            "        loss.backward()",
            "        optimizer.step()",
            "        optimizer.zero_grad()",
            "", "",
            'if __name__ == "__main__":',
            "    main()"]
    while len(out) < lines:
        out.append("# padding")
    return "\n".join(out[:lines]) + "\n"


def percentile(values, p):
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


# ---------------------------------------------------------------------------------------------- corpus mode

INTERESTING = re.compile(r"optim|fully_shard|FSDP|FullyShardedDataParallel|\bprepare\b")
MAX_FILE_BYTES = 2 * 1024 * 1024  # shardlint skips larger files


def sample_files(root, n, seed, largest=0, max_lines=5000):
    """[(path, text, interesting)]: a deterministic sample of the .py files shardlint's discovery finds
    under root that shardlint would lint (at most 2 MiB, no NUL byte, UTF-8), sorted by path; plus the
    `largest` files of at most `max_lines` lines (the editor's worst case), whether sampled or not."""
    candidates = []
    for p in harness.discover(root):
        try:
            with open(p, "rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
            if len(data) > MAX_FILE_BYTES or b"\0" in data:
                continue
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        candidates.append((p, text, bool(INTERESTING.search(text))))
    rng = random.Random(seed)
    hot = [c for c in candidates if c[2]]
    cold = [c for c in candidates if not c[2]]
    n_hot = min(len(hot), max(n - n // 3, n - len(cold)))
    picked = rng.sample(hot, n_hot) + rng.sample(cold, min(len(cold), n - n_hot))
    if largest:
        sized = sorted((c for c in candidates if c[1].count("\n") + 1 <= max_lines),
                       key=lambda c: (-(c[1].count("\n") + 1), c[0]))
        seen = {c[0] for c in picked}
        picked += [c for c in sized[:largest] if c[0] not in seen]
    return sorted(picked, key=lambda c: c[0])


def utf16_len(s):
    return len(s.encode("utf-16-le")) // 2


IDENT_END = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?=\s*[.(\[=,)])")


def code_edit_site(text):
    """(line, character) at the end of an identifier in code (not a comment, not a string-looking line), in the
    indented line nearest the middle of the file: typing `_` there renames what the code reads or writes,
    so the analysis really changes (the findings may change too); deleting it restores the file. None when
    the file has no such line."""
    lines = re.split(r"\r\n|\r|\n", text)
    best = None
    for i, l in enumerate(lines):
        body = l.lstrip(" \t")
        if not body or body == l or body.startswith(("#", "\"", "'", "@")) or "#" in body or '"' in body or "'" in body:
            continue
        m = IDENT_END.search(body)
        if not m:
            continue
        if best is None or abs(i - len(lines) // 2) < abs(best[0] - len(lines) // 2):
            best = (i, utf16_len(l[:len(l) - len(body) + m.end()]))
    return best


def edit_site(text):
    """(line, character) where a space can be typed and deleted without changing the findings: after the
    `#` of the comment line nearest the middle of the file, else at the end of the file (UTF-16 columns,
    the server's default position encoding)."""
    lines = re.split(r"\r\n|\r|\n", text)
    comments = [i for i, l in enumerate(lines) if l.lstrip(" \t").startswith("#")]
    if comments:
        i = min(comments, key=lambda k: abs(k - len(lines) // 2))
        return i, utf16_len(lines[i][:lines[i].index("#") + 1])
    return len(lines) - 1, utf16_len(lines[-1])


def measure_corpus(binary, root, n, seed, edits_per_file, wait_s, log, largest=0, edit_kind="comment"):
    root = os.path.abspath(root)
    name = os.path.basename(root.rstrip("/"))
    result = {"name": name, "root": root, "sample": n, "seed": seed, "edits_per_file": edits_per_file,
              "largest": largest, "edit_kind": edit_kind, "files": []}
    files = sample_files(root, n, seed, largest)
    if not files:
        result["error"] = "no .py file to open"
        return result
    client = Client([binary, "server"], WAIT_S, trace=True)
    try:
        client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                     "params": {"processId": os.getpid(), "rootUri": pathlib.Path(root).as_uri(), "capabilities": {}}})
        client.wait(lambda m: m.get("id") == 1, "the initialize response", wait_s)
        client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        version = 0
        for path, text, hot in files:
            rel = os.path.relpath(path, root)
            uri = pathlib.Path(path).as_uri()

            def published(v, uri=uri):
                return lambda m: (m.get("method") == "textDocument/publishDiagnostics"
                                  and m["params"].get("uri") == uri and m["params"].get("version") == v)

            version += 1
            t0 = client.send({"jsonrpc": "2.0", "method": "textDocument/didOpen",
                              "params": {"textDocument": {"uri": uri, "languageId": "python", "version": version,
                                                          "text": text}}})
            at, msg = client.wait(published(version), f"the diagnostics of didOpen {rel}", wait_s)
            entry = {"path": rel, "interesting": hot, "lines": text.count("\n") + 1, "bytes": len(text.encode()),
                     "open_ms": (at - t0) * 1000, "findings": len(msg["params"]["diagnostics"]), "edits_ms": []}
            sites = [("comment", edit_site(text))]
            code = code_edit_site(text)
            if edit_kind in ("code", "both") and code:
                sites = [("code", code)] if edit_kind == "code" else sites + [("code", code)]
            mark = len(client.trace_paths)
            entry["edit_kinds"] = []
            for k in range(edits_per_file):
                version += 1
                kind, (line, ch) = sites[(k // 2) % len(sites)]
                entry["edit_kinds"].append(kind)
                typed = "_" if kind == "code" else " "
                if k % 2 == 0:
                    change = {"range": {"start": {"line": line, "character": ch}, "end": {"line": line, "character": ch}},
                              "text": typed}
                else:
                    change = {"range": {"start": {"line": line, "character": ch},
                                        "end": {"line": line, "character": ch + 1}}, "text": ""}
                t0 = client.send({"jsonrpc": "2.0", "method": "textDocument/didChange",
                                  "params": {"textDocument": {"uri": uri, "version": version},
                                             "contentChanges": [change]}})
                at, msg = client.wait(published(version), f"the diagnostics of edit {k + 1} of {rel}", wait_s)
                entry["edits_ms"].append((at - t0) * 1000)
                if kind == "comment" and len(msg["params"]["diagnostics"]) != entry["findings"]:
                    entry["findings_changed"] = True
            lints = [ms for kind, p, ms in client.trace_paths[mark:] if kind == "lint" and p in (path, os.path.realpath(path))]
            if lints:
                entry["lint_median_ms"] = statistics.median(lints)
            client.send({"jsonrpc": "2.0", "method": "textDocument/didClose", "params": {"textDocument": {"uri": uri}}})
            client.wait(lambda m, uri=uri: (m.get("method") == "textDocument/publishDiagnostics"
                                            and m["params"].get("uri") == uri and "version" not in m["params"]),
                        f"the cleared diagnostics of didClose {rel}", wait_s)
            result["files"].append(entry)
            log(f"  {name}: {rel}: open {entry['open_ms']:.1f} ms, edits "
                + " ".join(f"{x:.1f}" for x in entry["edits_ms"]) + " ms")
        client.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
        client.wait(lambda m: m.get("id") == 2, "the shutdown response", wait_s)
        client.send({"jsonrpc": "2.0", "method": "exit"})
        try:
            result["exit_code"] = client.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            result["error"] = "the server did not exit after shutdown + exit"
    except SystemExit as e:  # a timeout or a crash: keep what was measured
        result["error"] = str(e)
    except (BrokenPipeError, OSError) as e:
        result["error"] = f"the server went away: {e}"
    finally:
        if client.proc.poll() is None:
            client.proc.kill()
            client.proc.wait()
    summarize(result)
    return result


def summarize(result):
    edits = [x for f in result["files"] for x in f["edits_ms"]]
    opens = [f["open_ms"] for f in result["files"]]
    s = {"files": len(result["files"]), "files_interesting": sum(1 for f in result["files"] if f["interesting"]),
         "edits": len(edits)}
    if edits:
        s.update(edit_p50_ms=statistics.median(edits), edit_p95_ms=percentile(edits, 95), edit_max_ms=max(edits))
    for kind in ("comment", "code"):
        mine = [x for f in result["files"] for x, k in zip(f["edits_ms"], f.get("edit_kinds", [])) if k == kind]
        if mine:
            s[f"edit_{kind}_p95_ms"] = percentile(mine, 95)
            s[f"edit_{kind}_count"] = len(mine)
    big = [x for f in result["files"] if f["lines"] >= 2000 for x in f["edits_ms"]]
    if big:
        s.update(edit_large_p95_ms=percentile(big, 95), edit_large_files=sum(1 for f in result["files"] if f["lines"] >= 2000))
    if opens:
        s.update(open_p50_ms=statistics.median(opens), open_max_ms=max(opens))
    result["summary"] = s
    slow = sorted(result["files"], key=lambda f: -max(f["edits_ms"], default=0))[:5]
    result["slowest"] = [{"path": f["path"], "edit_max_ms": max(f["edits_ms"], default=float("nan")),
                          "edit_median_ms": statistics.median(f["edits_ms"]) if f["edits_ms"] else float("nan"),
                          "open_ms": f["open_ms"], "lines": f["lines"], "lint_median_ms": f.get("lint_median_ms")}
                         for f in slow]


def corpus_main(args):
    def log(msg):
        if args.verbose:
            print(msg, file=sys.stderr, flush=True)

    results = [measure_corpus(args.binary, d, args.sample, args.seed, args.edits_per_file, args.timeout, log,
                              args.largest, args.edit_kind)
               for d in args.corpus]
    print(f"shardlint server: edit -> publishDiagnostics on real files; sample of {args.sample} files per checkout "
          f"(seed {args.seed}) plus its {args.largest} largest files of at most 5,000 lines, {args.edits_per_file} "
          f"one-character edits per file ({args.edit_kind}: a space after a comment's `#`, and/or `_` typed after an "
          f"identifier in code, each deleted again)")
    print()
    print("| checkout | files (optim/FSDP/prepare) | edits | didOpen p50 ms | edit p50 ms | edit p95 ms | edit max ms "
          "| comment-edit p95 ms | code-edit p95 ms | files >= 2,000 lines: edit p95 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    def ms(s, key):
        return f"{s[key]:.1f}" if key in s else ""

    for r in results:
        s = r["summary"]
        if not s["edits"]:
            print(f"| {r['name']} | {s['files']} | 0 | | | | | | | |")
            continue
        big = f"{ms(s, 'edit_large_p95_ms')} ({s['edit_large_files']} files)" if "edit_large_p95_ms" in s else ""
        print(f"| {r['name']} | {s['files']} ({s['files_interesting']}) | {s['edits']} | {s['open_p50_ms']:.1f} | "
              f"{s['edit_p50_ms']:.1f} | {s['edit_p95_ms']:.1f} | {s['edit_max_ms']:.1f} | "
              f"{ms(s, 'edit_comment_p95_ms')} | {ms(s, 'edit_code_p95_ms')} | {big} |")
    for r in results:
        if r["slowest"]:
            print()
            print(f"{r['name']}: slowest files (max edit ms, median edit ms, didOpen ms, lines, server lint median ms):")
            for f in r["slowest"]:
                lint = f"{f['lint_median_ms']:.1f}" if f.get("lint_median_ms") is not None else "?"
                print(f"  {f['path']}: {f['edit_max_ms']:.1f}, {f['edit_median_ms']:.1f}, {f['open_ms']:.1f}, "
                      f"{f['lines']}, {lint}")
        if r.get("error"):
            print(f"{r['name']}: FAILED: {r['error']}")
        changed = [f["path"] for f in r["files"] if f.get("findings_changed")]
        if changed:
            print(f"{r['name']}: note: the number of findings changed after an edit in {', '.join(changed)}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"corpora": results}, f, indent=1)
    return 1 if any(r.get("error") for r in results) else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "shardlint"))
    ap.add_argument("--lines", type=int, default=5000)
    ap.add_argument("--edits", type=int, default=50)
    ap.add_argument("--corpus", action="append", default=[], metavar="DIR",
                    help="corpus mode: a checkout to sample files from (repeatable; one server per DIR)")
    ap.add_argument("--sample", type=int, default=30, help="corpus mode: files per checkout (default 30)")
    ap.add_argument("--seed", type=int, default=12, help="corpus mode: the sample's random seed (default 12)")
    ap.add_argument("--edits-per-file", type=int, default=4, help="corpus mode: edits per file (default 4)")
    ap.add_argument("--largest", type=int, default=0,
                    help="corpus mode: also open the N largest files of at most 5,000 lines (default 0)")
    ap.add_argument("--edit-kind", choices=("comment", "code", "both"), default="comment",
                    help="corpus mode: where the edits are typed (default comment; both alternates pairs)")
    ap.add_argument("--timeout", type=float, default=60.0, help="corpus mode: seconds to wait for one answer")
    ap.add_argument("--json", metavar="FILE", help="corpus mode: also write the results as JSON")
    ap.add_argument("-v", "--verbose", action="store_true", help="corpus mode: print every file's latencies")
    args = ap.parse_args()
    if not os.access(args.binary, os.X_OK):
        raise SystemExit(f"{args.binary}: not found (build it with scripts/setup.sh, or pass --binary)")
    if args.corpus:
        for d in args.corpus:
            if not os.path.isdir(d):
                raise SystemExit(f"--corpus {d}: not a directory")
        return corpus_main(args)

    with tempfile.TemporaryDirectory(prefix="shardlint-lsp-bench-") as tmp:
        path = os.path.join(tmp, "train.py")
        text = generate(args.lines)
        with open(path, "w") as f:
            f.write(text)
        uri = "file://" + path
        lines = text.split("\n")
        # Edit sites: the `total = 0.0` lines of the helpers, spread over the file.
        sites = [n for n, l in enumerate(lines) if l == "    total = 0.0"]
        client = Client([args.binary, "server"], WAIT_S, trace=True)
        client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                     "params": {"processId": os.getpid(), "rootUri": "file://" + tmp, "capabilities": {}}})
        client.wait(lambda m: m.get("id") == 1, "the initialize response")
        client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})

        def published(version):
            return lambda m: (m.get("method") == "textDocument/publishDiagnostics"
                              and m["params"].get("uri") == uri and m["params"].get("version") == version)

        t0 = client.send({"jsonrpc": "2.0", "method": "textDocument/didOpen",
                          "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                      "text": text}}})
        at, msg = client.wait(published(1), "the diagnostics of didOpen")
        open_ms = (at - t0) * 1000
        findings = len(msg["params"]["diagnostics"])

        latencies = []
        client.trace.clear()
        for i in range(args.edits):
            version = i + 2
            line = sites[(i // 2 * 37) % len(sites)]
            if i % 2 == 0:  # type a digit: `total = 0.0` -> `total = 0.01`
                change = {"range": {"start": {"line": line, "character": 15}, "end": {"line": line, "character": 15}},
                          "text": "1"}
            else:  # and delete it again
                change = {"range": {"start": {"line": line, "character": 15}, "end": {"line": line, "character": 16}},
                          "text": ""}
            t0 = client.send({"jsonrpc": "2.0", "method": "textDocument/didChange",
                              "params": {"textDocument": {"uri": uri, "version": version},
                                         "contentChanges": [change]}})
            at, msg = client.wait(published(version), f"the diagnostics of edit {i + 1}")
            if len(msg["params"]["diagnostics"]) != findings:
                raise SystemExit(f"edit {i + 1}: {len(msg['params']['diagnostics'])} diagnostics, expected {findings}")
            latencies.append((at - t0) * 1000)

        client.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
        client.wait(lambda m: m.get("id") == 2, "the shutdown response")
        client.send({"jsonrpc": "2.0", "method": "exit"})
        try:
            code = client.proc.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            client.proc.kill()
            raise SystemExit("the server did not exit after shutdown + exit")

    print(f"shardlint server: edit -> publishDiagnostics, {args.lines}-line FSDP script "
          f"({len(text)} bytes, {findings} finding{'s' if findings != 1 else ''}), {args.edits} one-character edits")
    print()
    print("| measure | ms |")
    print("|---|---|")
    print(f"| didOpen -> diagnostics | {open_ms:.1f} |")
    print(f"| edit median | {statistics.median(latencies):.1f} |")
    print(f"| edit p95 | {percentile(latencies, 95):.1f} |")
    print(f"| edit min | {min(latencies):.1f} |")
    print(f"| edit max | {max(latencies):.1f} |")
    parses = [ms for kind, ms in client.trace if kind == "incremental parse"]
    lints = [ms for kind, ms in client.trace if kind == "lint"]
    if parses and lints:
        print(f"| of which incremental parse, median | {statistics.median(parses):.2f} |")
        print(f"| of which lint (analysis engine), median | {statistics.median(lints):.1f} |")
        print(f"| rest (protocol, JSON, pipes), median | "
              f"{statistics.median(latencies) - statistics.median(lints) - statistics.median(parses):.1f} |")
    print()
    print(f"server exit code after shutdown + exit: {code}")
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
