#!/usr/bin/env python3
"""Edit -> publishDiagnostics of one file in `shardlint server`, for profiling a single slow file (Python 3
standard library only; valgrind for --callgrind).

The server starts on ROOT (the workspace), opens FILE (relative to ROOT), makes WARMUP edits, then EDITS
measured ones, each a ranged change that types one character at the site lsp_latency.py uses for the kind
(`code`: `_` at the end of an identifier near the file's middle; `comment`: a space after the `#` of the
comment line nearest the middle) or deletes it again. It prints the edits' median, p95 and maximum, and the
median of the server's own lint time (its trace), and the server's RSS and peak RSS after the last edit (under
--callgrind, valgrind's).

With --callgrind OUT the server runs under `valgrind --tool=callgrind --instr-atstart=no` and only the measured
edits are instrumented (callgrind_control switches instrumentation on after the warm-up and off after the last
measured edit): `callgrind_annotate --inclusive=yes OUT.<pid>` then shows where those edits' instructions go.
Instruction counts are deterministic; the wall-clock times printed under valgrind are not comparable.

  python3 scripts/bench/lsp_profile.py --binary build/shardlint --root /work/eco-cache/torchtitan \\
      --file torchtitan/experiments/graph_trainer/ep_chunk_pass.py --edits 10 --kind code --callgrind /tmp/cg
"""
import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lsp_client import Client  # noqa: E402
from lsp_latency import code_edit_site, edit_site, percentile  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="build/shardlint")
    ap.add_argument("--root", required=True, help="the workspace folder the server opens")
    ap.add_argument("--file", required=True, help="the file to edit, relative to --root")
    ap.add_argument("--edits", type=int, default=20, help="measured edits (default 20)")
    ap.add_argument("--warmup", type=int, default=4, help="edits before the measured ones (default 4)")
    ap.add_argument("--kind", choices=["code", "comment"], default="code")
    ap.add_argument("--callgrind", metavar="OUT", help="run the server under callgrind, writing OUT.<pid>")
    ap.add_argument("--timeout", type=float, default=600, help="seconds to wait for one answer")
    args = ap.parse_args()

    root = os.path.abspath(args.root)
    path = os.path.join(root, args.file)
    text = open(path, encoding="utf-8").read()
    site = code_edit_site(text) if args.kind == "code" else edit_site(text)
    if site is None:
        raise SystemExit(f"{args.file}: no place for a {args.kind} edit")
    line, ch = site
    typed = "_" if args.kind == "code" else " "

    argv = [os.path.abspath(args.binary), "server"]
    if args.callgrind:
        argv = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                f"--callgrind-out-file={args.callgrind}.%p"] + argv
    client = Client(argv, args.timeout, trace=True)
    uri = pathlib.Path(path).as_uri()

    def published(v):
        return lambda m: (m.get("method") == "textDocument/publishDiagnostics"
                          and m["params"].get("uri") == uri and m["params"].get("version") == v)

    client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"processId": os.getpid(), "rootUri": pathlib.Path(root).as_uri(), "capabilities": {}}})
    client.wait(lambda m: m.get("id") == 1, "the initialize response")
    client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    client.send({"jsonrpc": "2.0", "method": "textDocument/didOpen",
                 "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}})
    client.wait(published(1), "the diagnostics of didOpen")
    version = 1

    def edit(k):
        nonlocal version
        version += 1
        end = ch if k % 2 == 0 else ch + 1
        change = {"range": {"start": {"line": line, "character": ch}, "end": {"line": line, "character": end}},
                  "text": typed if k % 2 == 0 else ""}
        t0 = client.send({"jsonrpc": "2.0", "method": "textDocument/didChange",
                          "params": {"textDocument": {"uri": uri, "version": version}, "contentChanges": [change]}})
        at, _ = client.wait(published(version), f"the diagnostics of edit {version - 1}")
        return (at - t0) * 1000

    for k in range(args.warmup):
        edit(k)
    pid = client.proc.pid
    if args.callgrind:
        time.sleep(5)  # the warm-up's background passes (importers) finish before instrumentation starts
        subprocess.run(["callgrind_control", "-i", "on", str(pid)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    mark = len(client.trace_paths)
    times = [edit(args.warmup + k) for k in range(args.edits)]
    if args.callgrind:
        subprocess.run(["callgrind_control", "-i", "off", str(pid)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lints = [ms for kind, _, ms in client.trace_paths[mark:] if kind == "lint"]
    rss = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for row in f:
                key, _, value = row.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    rss[key] = int(value.split()[0]) / 1024
    except OSError:
        pass
    client.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
    client.wait(lambda m: m.get("id") == 2, "the shutdown response")
    client.send({"jsonrpc": "2.0", "method": "exit"})
    client.proc.wait(timeout=args.timeout)
    print(f"{args.file} ({args.kind} edits at line {line + 1}): median {statistics.median(times):.2f} ms, "
          f"p95 {percentile(times, 95):.2f} ms, max {max(times):.2f} ms over {len(times)} edits; "
          f"server lint median {statistics.median(lints) if lints else 0:.2f} ms"
          + (f"; server RSS {rss['VmRSS']:.1f} MiB, peak {rss['VmHWM']:.1f} MiB" if len(rss) == 2 else ""))
    if args.callgrind:
        print(f"profile: {args.callgrind}.{pid} (callgrind_annotate --inclusive=yes {args.callgrind}.{pid})")


if __name__ == "__main__":
    main()
