"""Running shardlint on a cached checkout and reading its JSON findings."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from .common import SHARDLINT_EXIT_MEANING
from .repos import Repo
from .triage import Key


@dataclasses.dataclass(frozen=True)
class Finding:
    repo: str
    path: str
    line: int
    code: str
    name: str = ""
    message: str = ""

    @property
    def key(self) -> Key:
        return (self.repo, self.path, self.line, self.code)


@dataclasses.dataclass
class RunResult:
    repo: str
    status: str  # "ok" | "missing" | "timeout" | "error"
    seconds: float = 0.0
    findings: list[Finding] = dataclasses.field(default_factory=list)
    detail: str = ""
    files_checked: int | None = None
    commit_recorded: bool = False


def _tail(data: bytes, limit: int = 600) -> str:
    text = data.decode("utf-8", "replace").strip()
    if len(text) > limit:
        text = "..." + text[-limit:]
    return text.replace("\n", "\n    ")


def _normalise_finding_path(path: str, checkout: Path) -> str:
    if os.path.isabs(path):
        try:
            path = os.path.relpath(path, checkout)
        except ValueError:
            return path
    path = path.replace(os.sep, "/")
    while path.startswith("./"):
        path = path[2:]
    return path


def parse_shardlint_json(repo: str, out: bytes, checkout: Path) -> tuple[list[Finding], int | None]:
    """Findings from `shardlint check --format json`; raises ValueError when the output is not that."""
    try:
        doc = json.loads(out.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"output is not JSON ({e}): {_tail(out, 200)!r}") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("findings"), list):
        raise ValueError("JSON output has no 'findings' list")
    findings = []
    for i, f in enumerate(doc["findings"]):
        try:
            code, path, line = f["code"], f["path"], f["line"]
        except (TypeError, KeyError) as e:
            raise ValueError(f"finding #{i} lacks {e}") from e
        if not isinstance(code, str) or not isinstance(path, str) or not isinstance(line, int):
            raise ValueError(f"finding #{i} has a malformed code, path or line")
        findings.append(
            Finding(repo, _normalise_finding_path(path, checkout), line, code,
                    str(f.get("name", "")), str(f.get("message", "")))
        )
    files_checked = (doc.get("summary") or {}).get("files_checked")
    return findings, files_checked if isinstance(files_checked, int) else None


def run_shardlint(shardlint: Path, repo: str, checkout: Path, timeout: float | None) -> RunResult:
    """Runs `shardlint check . --format json` in the checkout. Never raises for a failed run."""
    cmd = [str(shardlint), "check", ".", "--format", "json", "--no-cache"]  # analyse every file, write nothing
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            cmd, cwd=checkout, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, so a timeout kills it and its children
        )
    except OSError as e:
        return RunResult(repo, "error", detail=f"cannot run {shardlint}: {e.strerror or e}")
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        seconds = time.monotonic() - start
        return RunResult(repo, "timeout", seconds, detail=f"timed out after {timeout:g} s; shardlint was killed")
    seconds = time.monotonic() - start
    rc = proc.returncode
    if rc < 0:
        try:
            signame = signal.Signals(-rc).name
        except ValueError:
            signame = f"signal {-rc}"
        return RunResult(repo, "error", seconds, detail=f"shardlint was killed by {signame}; stderr: {_tail(err)}")
    if rc not in (0, 1):
        meaning = SHARDLINT_EXIT_MEANING.get(rc, "unexpected exit code")
        return RunResult(repo, "error", seconds, detail=f"shardlint exited {rc} ({meaning}); stderr: {_tail(err)}")
    try:
        findings, files_checked = parse_shardlint_json(repo, out, checkout)
    except ValueError as e:
        return RunResult(repo, "error", seconds, detail=f"shardlint exited {rc} but {e}")
    if (rc == 0) != (not findings):
        return RunResult(
            repo, "error", seconds,
            detail=f"shardlint exited {rc} with {len(findings)} findings in its JSON (0 means none, 1 means some)",
        )
    return RunResult(repo, "ok", seconds, findings, files_checked=files_checked)


# --------------------------------------------------------------------------------------------------
# cache


def commit_record(cache: Path, name: str) -> Path:
    """File next to the checkout that records the commit it was obtained at (written by --fetch and
    --from-git-dir); kept outside the checkout so it is never linted."""
    return cache / f"{name}.commit"


def missing_message(repo: Repo, cache: Path) -> str:
    return (
        f"no checkout at {cache / repo.name}. Obtain it with\n"
        f"      python3 ecosystem/check.py --cache {cache} --fetch --repo {repo.name}"
        f"   (network: git clone {repo.url}, checkout {repo.commit[:12]})\n"
        f"    or, from a local git directory that has the commit,\n"
        f"      python3 ecosystem/check.py --cache {cache} --from-git-dir {repo.name}=GITDIR\n"
        f"    or pass --skip-missing to lint only the checkouts that are there"
    )


def check_repo(shardlint: Path, repo: Repo, cache: Path, timeout: float | None) -> RunResult:
    checkout = cache / repo.name
    if not checkout.is_dir():
        return RunResult(repo.name, "missing", detail=missing_message(repo, cache))
    record = commit_record(cache, repo.name)
    recorded = False
    if record.is_file():
        commit = record.read_text(encoding="utf-8").strip()
        if commit != repo.commit:
            return RunResult(
                repo.name, "error",
                detail=f"the checkout is at {commit[:12]} ({record}) but repos.toml pins {repo.commit[:12]}; "
                f"remove {checkout} and {record} and obtain it again",
            )
        recorded = True
    result = run_shardlint(shardlint, repo.name, checkout, timeout)
    result.commit_recorded = recorded
    return result
