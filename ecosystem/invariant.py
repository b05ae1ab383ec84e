"""One answer per file: a file's findings do not depend on which other files are linted with it.

For one repository checkout and the findings of the whole-repository run (`shardlint check .`), this
lints every file with a finding and a sample of the other Python files (a fixed sample per repository)
in three more ways and compares each file's findings:

  alone     `shardlint check FILE`, one process per file;
  folder    `shardlint check FOLDER` (the file's own folder), one process per folder;
  server    `shardlint server` with the repository as its workspace: didOpen, then a pull
            `textDocument/diagnostic` for each file, in one server per repository.

The command-line runs compare (line, column, code, message); the server compares (line, code), since an
editor's range is in UTF-16 columns and its message is the editor's. Used by `check.py --invariant`.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

# The folders shardlint's discovery skips (analyzer/driver/Discovery.cpp), so that the sample holds only
# files the whole-repository run analysed.
SKIPPED_DIRS = {"node_modules", "__pycache__", "build", "dist", "site-packages", "venv", "env", "__pypackages__",
                "_build", "buck-out", "htmlcov"}


@dataclass
class InvariantResult:
    repo: str
    files: int = 0
    mismatches: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0


def python_files(checkout: Path) -> list[str]:
    """Repository-relative paths of the Python files the whole-repository run sees, sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(checkout):
        keep = []
        for d in dirnames:
            if (len(d) > 1 and d.startswith(".")) or d in SKIPPED_DIRS or d.endswith(".egg-info"):
                continue
            if (Path(dirpath) / d / "pyvenv.cfg").exists():
                continue
            keep.append(d)
        dirnames[:] = sorted(keep)
        for f in filenames:
            if f.endswith(".py"):
                out.append(os.path.relpath(os.path.join(dirpath, f), checkout).replace(os.sep, "/"))
    return sorted(out)


def choose_files(repo: str, all_files: list[str], with_findings: set[str], sample: int) -> list[str]:
    """Every file with a finding, and `sample` others picked by a generator seeded with the repository name."""
    others = [f for f in all_files if f not in with_findings]
    seed = int.from_bytes(hashlib.sha256(repo.encode()).digest()[:8], "big")
    picked = random.Random(seed).sample(others, min(sample, len(others)))
    return sorted(with_findings | set(picked))


def _norm(path: str, checkout: Path) -> str:
    if os.path.isabs(path):
        path = os.path.relpath(path, checkout)
    path = path.replace(os.sep, "/")
    while path.startswith("./"):
        path = path[2:]
    return path


def cli_findings(shardlint: Path, checkout: Path, targets: list[str], timeout: float | None) -> dict[str, set]:
    """{path: {(line, column, code, message)}} of `shardlint check TARGETS --format json` in the checkout."""
    proc = subprocess.run([str(shardlint), "check", *targets, "--format", "json", "--no-cache"], cwd=checkout,
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"shardlint check {' '.join(targets)} exited {proc.returncode}: "
                           f"{proc.stderr.decode('utf-8', 'replace').strip()[-300:]}")
    doc = json.loads(proc.stdout.decode("utf-8"))
    out: dict[str, set] = {}
    for f in doc.get("findings", []):
        out.setdefault(_norm(f["path"], checkout), set()).add(
            (f["line"], f.get("column", 0), f["code"], f.get("message", "")))
    return out


class LspClient:
    """A minimal LSP client over the server's stdin/stdout (Content-Length framing)."""

    def __init__(self, shardlint: Path, checkout: Path):
        self.proc = subprocess.Popen([str(shardlint), "server"], cwd=checkout, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.next_id = 0

    def send(self, msg: dict) -> None:
        body = json.dumps(msg).encode("utf-8")
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def read(self) -> dict:
        length = None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the server closed its output")
            line = line.strip()
            if not line:
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length is None:
            raise RuntimeError("a message without Content-Length")
        return json.loads(self.proc.stdout.read(length))

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        rid = self.next_id
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            msg = self.read()
            if msg.get("id") == rid and "method" not in msg:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result")
            if "method" in msg and "id" in msg:  # a request from the server: answer it empty
                self.send({"jsonrpc": "2.0", "id": msg["id"], "result": None})

    def notify(self, method: str, params: dict) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def close(self) -> None:
        try:
            self.request("shutdown", {})
            self.notify("exit", {})
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
            self.proc.wait()


def server_findings(shardlint: Path, checkout: Path, files: list[str]) -> dict[str, set]:
    """{path: {(line, code)}} from one `shardlint server` with the checkout as its workspace."""
    client = LspClient(shardlint, checkout)
    out: dict[str, set] = {}
    try:
        root = checkout.resolve().as_uri()
        client.request("initialize", {"processId": os.getpid(), "rootUri": root,
                                      "workspaceFolders": [{"uri": root, "name": checkout.name}],
                                      "capabilities": {"textDocument": {"diagnostic": {}}}})
        client.notify("initialized", {})
        for rel in files:
            path = checkout / rel
            uri = path.resolve().as_uri()
            text = path.read_bytes().decode("utf-8", "replace")
            client.notify("textDocument/didOpen",
                          {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})
            report = client.request("textDocument/diagnostic", {"textDocument": {"uri": uri}}) or {}
            for d in report.get("items", []):
                code = d.get("code")
                if isinstance(code, dict):
                    code = code.get("value")
                if isinstance(code, str) and code.startswith("SL"):
                    out.setdefault(rel, set()).add((d["range"]["start"]["line"] + 1, code))
            client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    finally:
        client.close()
    return out


def _describe(mode: str, rel: str, want: set, got: set) -> str:
    missing = sorted(want - got)
    extra = sorted(got - want)
    parts = []
    if missing:
        parts.append("missing " + ", ".join(f"{x[0]}:{x[1] if len(x) == 2 else x[2]}" for x in missing))
    if extra:
        parts.append("extra " + ", ".join(f"{x[0]}:{x[1] if len(x) == 2 else x[2]}" for x in extra))
    return f"{rel}: {mode} differs from the whole repository: {'; '.join(parts)}"


def check_invariant(shardlint: Path, repo: str, checkout: Path, sample: int = 200,
                    timeout: float | None = 300) -> InvariantResult:
    start = time.monotonic()
    res = InvariantResult(repo)
    try:
        whole = cli_findings(shardlint, checkout, ["."], timeout)
        with_findings = {p for p in whole if p.endswith(".py")}
        files = choose_files(repo, python_files(checkout), with_findings, sample)
        res.files = len(files)
        alone: dict[str, set] = {}
        for rel in files:
            alone.update({k: v for k, v in cli_findings(shardlint, checkout, [rel], timeout).items() if k == rel})
        folder: dict[str, set] = {}
        by_folder: dict[str, list[str]] = {}
        for rel in files:
            by_folder.setdefault(os.path.dirname(rel) or ".", []).append(rel)
        for d, members in sorted(by_folder.items()):
            got = cli_findings(shardlint, checkout, [d], timeout)
            for rel in members:
                if rel in got:
                    folder[rel] = got[rel]
        served = server_findings(shardlint, checkout, files)
        for rel in files:
            want = whole.get(rel, set())
            for mode, got in (("alone", alone.get(rel, set())), ("its folder", folder.get(rel, set()))):
                if got != want:
                    res.mismatches.append(_describe(mode, rel, want, got))
            short = {(x[0], x[2]) for x in want}
            if served.get(rel, set()) != short:
                res.mismatches.append(_describe("the server", rel, short, served.get(rel, set())))
    except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
        res.errors.append(f"{repo}: {e}")
    res.seconds = time.monotonic() - start
    return res
