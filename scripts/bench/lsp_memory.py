#!/usr/bin/env python3
"""Memory of `shardlint server` over a long editing session (Python 3 standard library only).

Starts `build/shardlint server`, opens a generated 5,000-line FSDP training script (the file of
lsp_latency.py), sends 10,000 incremental didChange edits (a character typed into the module
docstring, then deleted again: the findings stay the same, each edit is a real re-parse and
re-lint) and samples the server's VmRSS from /proc/PID/status. The client waits for the
diagnostics of the newest version every --await-every edits (default 10: 1,000 awaited full
analyses of the file; the edits in between are sent back to back, as fast typing does, and the
server lints them in batches), so the run stays within a few minutes on a small machine.

Prints the RSS at start (after initialize), after the warm-up (--warmup edits, default 1,000),
at the end, the peak and the growth from warm-up to end. With --max-growth-mib, exits 1 when
the growth is larger (the ctest `lsp_memory_flat` runs a short version this way).

    scripts/bench/lsp_memory.py [--binary build/shardlint] [--lines 5000] [--edits 10000]
                                [--warmup 1000] [--await-every 10] [--max-growth-mib N]
"""
import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lsp_client import Client  # noqa: E402
from lsp_latency import generate  # noqa: E402  (the same generated 5,000-line script)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WAIT_S = 60.0


def mib(kib):
    return kib / 1024.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "shardlint"))
    ap.add_argument("--lines", type=int, default=5000)
    ap.add_argument("--edits", type=int, default=10000)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--await-every", type=int, default=10)
    ap.add_argument("--max-growth-mib", type=float, default=None)
    a = ap.parse_args()
    if a.warmup >= a.edits:
        raise SystemExit("--warmup must be below --edits")

    with tempfile.TemporaryDirectory(prefix="shardlint-lsp-memory-") as tmp:
        path = os.path.join(tmp, "train.py")
        text = generate(a.lines)
        with open(path, "w") as f:
            f.write(text)
        uri = "file://" + path
        c = Client([a.binary, "server"], WAIT_S)
        c.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"processId": os.getpid(), "rootUri": "file://" + tmp, "capabilities": {}}})
        c.wait(lambda m: m.get("id") == 1, "the initialize response")
        c.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        start = c.rss_kib()

        def published(version):
            return lambda m: (m.get("method") == "textDocument/publishDiagnostics"
                              and m["params"]["uri"] == uri and m["params"].get("version") == version)

        c.send({"jsonrpc": "2.0", "method": "textDocument/didOpen",
                "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}})
        first = c.wait(published(1), "the first diagnostics")[1]["params"]["diagnostics"]
        peak, warm, awaited = start, None, 0
        t0 = time.monotonic()
        for i in range(a.edits):
            version = i + 2
            # Type an `x` after the docstring's opening quotes, then delete it.
            if i % 2 == 0:
                change = {"range": {"start": {"line": 0, "character": 3}, "end": {"line": 0, "character": 3}},
                          "text": "x"}
            else:
                change = {"range": {"start": {"line": 0, "character": 3}, "end": {"line": 0, "character": 4}},
                          "text": ""}
            c.send({"jsonrpc": "2.0", "method": "textDocument/didChange",
                    "params": {"textDocument": {"uri": uri, "version": version}, "contentChanges": [change]}})
            if (i + 1) % a.await_every == 0 or i + 1 == a.edits:
                diags = c.wait(published(version), f"the diagnostics of version {version}")[1]["params"]["diagnostics"]
                awaited += 1
                if i % 2 == 1 and len(diags) != len(first):
                    raise SystemExit(f"version {version}: {len(diags)} findings, expected {len(first)}")
                rss = c.rss_kib()
                peak = max(peak, rss)
                if i + 1 == a.warmup or (warm is None and i + 1 > a.warmup):
                    warm = rss
        end = c.rss_kib()
        elapsed = time.monotonic() - t0
        c.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
        c.wait(lambda m: m.get("id") == 2, "the shutdown response")
        c.send({"jsonrpc": "2.0", "method": "exit"})
        c.proc.wait(timeout=WAIT_S)

    growth = end - warm
    print(f"shardlint server, {a.lines}-line file, {a.edits} didChange edits "
          f"({awaited} awaited analyses, one every {a.await_every} edits), {elapsed:.1f} s")
    print(f"  RSS at start (after initialize): {mib(start):8.1f} MiB")
    print(f"  RSS after {a.warmup} edits (warm-up): {mib(warm):8.1f} MiB")
    print(f"  RSS at the end:                {mib(end):8.1f} MiB")
    print(f"  peak RSS sampled:              {mib(peak):8.1f} MiB")
    print(f"  growth after warm-up:          {mib(growth):+8.1f} MiB "
          f"({100.0 * growth / warm:+.1f}%, {1024.0 * mib(growth) / max(1, a.edits - a.warmup):+.2f} KiB per edit)")
    if c.proc.returncode != 0:
        raise SystemExit(f"the server exited with {c.proc.returncode} after shutdown and exit")
    if a.max_growth_mib is not None and mib(growth) > a.max_growth_mib:
        print(f"FAIL: grew by more than {a.max_growth_mib} MiB after the warm-up")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
