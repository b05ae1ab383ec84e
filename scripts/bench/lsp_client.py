"""A minimal LSP client over a child process's stdin/stdout, shared by the benchmark scripts
(lsp_latency.py, lsp_memory.py).

Messages are framed with Content-Length headers both ways. A reader thread puts every message the
server writes, with the perf_counter() time it was read, on a queue; `wait` takes messages off it
until one matches. With trace=True the server runs with SHARDLINT_LSP_TRACE=1 and the timings it
prints on stderr ("shardlint server: <kind> of <path>: <ms> ms") are collected.
"""
import json
import os
import queue
import re
import subprocess
import threading
import time

_TRACE = re.compile(r"shardlint server: (incremental parse|full parse|lint) of (.*?): ([0-9.]+) ms"
                    r"(?:, [0-9]+ diagnostics, ([0-9]+) summaries carried over(?:, ([0-9]+) arms)?"
                    r"(?:, ([0-9]+) run directly)?)?")


class Client:
    def __init__(self, argv, wait_s, trace=False):
        env = dict(os.environ, SHARDLINT_LSP_TRACE="1") if trace else None
        self.wait_s = wait_s
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE if trace else subprocess.DEVNULL, env=env)
        self.inbox = queue.Queue()
        self.trace = []  # (kind, ms) from the server's stderr
        self.trace_paths = []  # (kind, path, ms)
        self.carried = []  # per lint: the summaries an earlier lint of the file gave it
        self.arms = []  # per lint: the arms of its analysis an earlier lint's gave it
        self.direct = []  # per lint: functions its module body ran without computing their summary first
        threading.Thread(target=self._read, daemon=True).start()
        if trace:
            threading.Thread(target=self._read_trace, daemon=True).start()

    def _read_trace(self):
        for raw in self.proc.stderr:
            m = _TRACE.search(raw.decode("utf-8", "replace"))
            if m:
                self.trace.append((m.group(1), float(m.group(3))))
                self.trace_paths.append((m.group(1), m.group(2), float(m.group(3))))
                if m.group(4) is not None:
                    self.carried.append(int(m.group(4)))
                if m.group(5) is not None:
                    self.arms.append(int(m.group(5)))
                if m.group(6) is not None:
                    self.direct.append(int(m.group(6)))

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
        """Writes one message; returns the perf_counter() time after the write."""
        body = json.dumps(msg).encode("utf-8")
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()
        return time.perf_counter()

    def wait(self, pred, what, wait_s=None):
        """Returns (read time, message) of the first message for which pred is true."""
        wait_s = self.wait_s if wait_s is None else wait_s
        deadline = time.monotonic() + wait_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SystemExit(f"timed out after {wait_s:.0f}s waiting for {what}")
            try:
                at, msg = self.inbox.get(timeout=left)
            except queue.Empty:
                continue
            if msg is None:
                raise SystemExit(f"the server exited while waiting for {what}")
            if pred(msg):
                return at, msg

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise SystemExit("no VmRSS in /proc/PID/status")
