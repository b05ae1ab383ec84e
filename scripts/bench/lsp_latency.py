#!/usr/bin/env python3
"""Edit -> publishDiagnostics latency of `shardlint server` (Python 3 standard library only).

Starts `build/shardlint server`, opens a generated 5,000-line FSDP training script (an SL101 bug
near the end, classes and helper functions before it), sends one-character incremental edits
(each waits for the diagnostics of its version) and prints the latency of each step: the time
from writing the didChange to reading the matching textDocument/publishDiagnostics.

    scripts/bench/lsp_latency.py [--binary build/shardlint] [--lines 5000] [--edits 50]

The server runs with SHARDLINT_LSP_TRACE=1, which makes it print the time of each parse and
lint to stderr; the table splits the latency into incremental parse, lint (the analysis
engine) and the rest (protocol, JSON, pipes). Not part of the test suite (no timed tests).
"""
import re
import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WAIT_S = 10.0


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


class Client:
    def __init__(self, argv):
        env = dict(os.environ, SHARDLINT_LSP_TRACE="1")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
        self.inbox = queue.Queue()
        self.trace = []  # (kind, ms) from the server's stderr
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_trace, daemon=True).start()

    def _read_trace(self):
        pattern = re.compile(r"shardlint server: (incremental parse|full parse|lint) of .*?: ([0-9.]+) ms")
        for raw in self.proc.stderr:
            m = pattern.search(raw.decode("utf-8", "replace"))
            if m:
                self.trace.append((m.group(1), float(m.group(2))))

    def _read(self):
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    self.inbox.put((time.perf_counter(), None))
                    return
                line = line.strip()
                if not line:
                    break
                name, _, value = line.decode("ascii", "replace").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            body = out.read(length or 0)
            self.inbox.put((time.perf_counter(), json.loads(body)))

    def send(self, msg):
        body = json.dumps(msg).encode("utf-8")
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()
        return time.perf_counter()

    def wait(self, pred, what):
        deadline = time.monotonic() + WAIT_S
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SystemExit(f"timed out after {WAIT_S:.0f}s waiting for {what}")
            try:
                at, msg = self.inbox.get(timeout=left)
            except queue.Empty:
                continue
            if msg is None:
                raise SystemExit(f"the server exited while waiting for {what}")
            if pred(msg):
                return at, msg


def percentile(values, p):
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "shardlint"))
    ap.add_argument("--lines", type=int, default=5000)
    ap.add_argument("--edits", type=int, default=50)
    args = ap.parse_args()
    if not os.access(args.binary, os.X_OK):
        raise SystemExit(f"{args.binary}: not found (build it with scripts/setup.sh, or pass --binary)")

    with tempfile.TemporaryDirectory(prefix="shardlint-lsp-bench-") as tmp:
        path = os.path.join(tmp, "train.py")
        text = generate(args.lines)
        with open(path, "w") as f:
            f.write(text)
        uri = "file://" + path
        lines = text.split("\n")
        # Edit sites: the `total = 0.0` lines of the helpers, spread over the file.
        sites = [n for n, l in enumerate(lines) if l == "    total = 0.0"]
        client = Client([args.binary, "server"])
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
