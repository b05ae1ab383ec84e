#!/usr/bin/env python3
"""shardlint ecosystem check.

Lints checkouts of public repositories (ecosystem/repos.toml, each at a pinned commit) from a cache
folder and compares every finding with the committed triage (ecosystem/triage.tsv). The check fails on
a finding triaged `false`, on a finding nobody has triaged, and when a repository cannot be linted
(shardlint error, timeout, checkout missing from the cache). Triage lines no longer produced are listed
as "gone" so the triage can be pruned; they do not fail the check.

    python3 ecosystem/check.py --cache DIR                      # lint and compare
    python3 ecosystem/check.py --cache DIR --fetch              # obtain checkouts (network: git clone)
    python3 ecosystem/check.py --cache DIR --from-git-dir NAME=GITDIR   # from a local git directory

See ecosystem/README.md. Standard library only (Python >= 3.11 for tomllib).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
DEFAULT_REPOS = HERE / "repos.toml"
DEFAULT_TRIAGE = HERE / "triage.tsv"
DEFAULT_SHARDLINT = REPO_ROOT / "build" / "shardlint"
CACHE_ENV = "SHARDLINT_ECOSYSTEM_CACHE"
DEFAULT_CACHE = Path("~/.cache/shardlint-ecosystem")

VERDICTS = ("true", "false", "?")
TRIAGE_FIELDS = ("repo", "path", "line", "code", "verdict", "why")
TRIAGE_HEADER = "# " + "\t".join(TRIAGE_FIELDS)
MAX_WHY = 240  # one line of reasoning, not a paste

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
COMMIT_RE = re.compile(r"[0-9a-f]{40}\Z")
CODE_RE = re.compile(r"SL[0-9]{3}\Z")

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_USAGE = 2

# What shardlint's exit codes mean (README "Exit codes"); anything but 0 and 1 is an error here.
SHARDLINT_EXIT_MEANING = {
    2: "usage or I/O error",
    101: "internal error (a bug in shardlint)",
}


class EcosystemError(Exception):
    """Bad input (repos file, triage file, options, cache layout): exit status 2."""


# --------------------------------------------------------------------------------------------------
# repos.toml


@dataclasses.dataclass(frozen=True)
class Repo:
    name: str
    url: str
    commit: str


def load_repos(path: Path) -> list[Repo]:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise EcosystemError(f"{path}: cannot read: {e.strerror}") from e
    except tomllib.TOMLDecodeError as e:
        raise EcosystemError(f"{path}: not valid TOML: {e}") from e
    extra = sorted(set(data) - {"repo"})
    if extra:
        raise EcosystemError(f"{path}: unknown top-level keys {extra}; expected only [[repo]] tables")
    entries = data.get("repo")
    if not isinstance(entries, list) or not entries:
        raise EcosystemError(f"{path}: no [[repo]] tables")
    repos: list[Repo] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries, 1):
        where = f"{path}: [[repo]] #{i}"
        if not isinstance(entry, dict):
            raise EcosystemError(f"{where}: not a table")
        keys = set(entry)
        if keys != {"name", "url", "commit"}:
            missing = sorted({"name", "url", "commit"} - keys)
            unknown = sorted(keys - {"name", "url", "commit"})
            raise EcosystemError(f"{where}: missing keys {missing}, unknown keys {unknown}")
        name, url, commit = entry["name"], entry["url"], entry["commit"]
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise EcosystemError(f"{where}: bad name {name!r} (letters, digits, '.', '_', '-')")
        if not isinstance(url, str) or not url:
            raise EcosystemError(f"{where} ({name}): bad url {url!r}")
        if not isinstance(commit, str) or not COMMIT_RE.match(commit):
            raise EcosystemError(f"{where} ({name}): commit must be 40 lowercase hex digits, got {commit!r}")
        if name in seen:
            raise EcosystemError(f"{where}: duplicate name {name!r}")
        seen.add(name)
        repos.append(Repo(name, url, commit))
    return repos


# --------------------------------------------------------------------------------------------------
# triage file

Key = tuple[str, str, int, str]  # (repo, path, line, code); also the sort order of the triage file


@dataclasses.dataclass(frozen=True)
class TriageEntry:
    repo: str
    path: str
    line: int
    code: str
    verdict: str  # "true" | "false" | "?"
    why: str
    lineno: int  # line in the triage file, for messages

    @property
    def key(self) -> Key:
        return (self.repo, self.path, self.line, self.code)

    def to_line(self) -> str:
        return "\t".join((self.repo, self.path, str(self.line), self.code, self.verdict, self.why))


@dataclasses.dataclass
class Triage:
    source: str
    entries: dict[Key, TriageEntry]
    first_unsorted: int | None = None  # line number of the first entry out of order, if any

    def for_repo(self, repo: str) -> list[TriageEntry]:
        return [e for e in self.entries.values() if e.repo == repo]


def _check_path(path: str) -> str | None:
    if not path or path != path.strip():
        return "empty path or surrounding blanks"
    if path.startswith("/") or re.match(r"[A-Za-z]:[\\/]", path):
        return "path must be relative to the checkout"
    if "\\" in path:
        return "use '/' in paths"
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return "path must be normalised (no '.', '..' or empty components, no './' prefix)"
    return None


def parse_triage(text: str, source: str = "triage.tsv") -> Triage:
    """Parses the triage file. Every malformed line is an error naming `source:line`; all are reported."""
    errors: list[str] = []
    entries: dict[Key, TriageEntry] = {}
    first_unsorted: int | None = None
    previous: Key | None = None
    for lineno, raw in enumerate(text.split("\n"), 1):
        line = raw[:-1] if raw.endswith("\r") else raw
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{source}:{lineno}"
        fields = line.split("\t")
        if len(fields) != len(TRIAGE_FIELDS):
            errors.append(
                f"{where}: expected {len(TRIAGE_FIELDS)} tab-separated fields "
                f"({', '.join(TRIAGE_FIELDS)}), found {len(fields)}"
            )
            continue
        repo, path, line_text, code, verdict, why = fields
        problems = []
        if not NAME_RE.match(repo):
            problems.append(f"bad repo name {repo!r}")
        path_problem = _check_path(path)
        if path_problem:
            problems.append(f"{path_problem}: {path!r}")
        if not line_text.isascii() or not line_text.isdigit() or int(line_text) < 1:
            problems.append(f"line must be a positive integer, got {line_text!r}")
        if not CODE_RE.match(code):
            problems.append(f"code must look like SL101, got {code!r}")
        if verdict not in VERDICTS:
            problems.append(f"verdict must be one of {', '.join(VERDICTS)}, got {verdict!r}")
        elif verdict != "?":
            if not why.strip():
                problems.append(f"verdict {verdict} needs one line of why")
            elif why.strip().upper().startswith("TODO"):
                problems.append(f"verdict {verdict} still has the draft's TODO as its why")
        if len(why) > MAX_WHY:
            problems.append(f"why is {len(why)} characters; keep it to one short line (<= {MAX_WHY})")
        if problems:
            errors.append(f"{where}: " + "; ".join(problems))
            continue
        entry = TriageEntry(repo, path, int(line_text), code, verdict, why.strip(), lineno)
        if entry.key in entries:
            errors.append(f"{where}: duplicate of line {entries[entry.key].lineno} ({repo} {path}:{line_text} {code})")
            continue
        if previous is not None and entry.key < previous and first_unsorted is None:
            first_unsorted = lineno
        previous = entry.key
        entries[entry.key] = entry
    if errors:
        raise EcosystemError("malformed triage file:\n  " + "\n  ".join(errors))
    return Triage(source, entries, first_unsorted)


def load_triage(path: Path) -> Triage:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Triage(str(path), {})
    except (OSError, UnicodeDecodeError) as e:
        raise EcosystemError(f"{path}: cannot read: {e}") from e
    return parse_triage(text, _display(path))


def format_triage(entries: list[TriageEntry], header: list[str] | None = None) -> str:
    lines = list(header) if header else [TRIAGE_HEADER]
    lines += [e.to_line() for e in sorted(entries, key=lambda e: e.key)]
    return "\n".join(lines) + "\n"


def sort_triage_file(path: Path) -> int:
    """Rewrites the triage file in sorted order; leading comment lines stay on top. Returns entries."""
    text = path.read_text(encoding="utf-8")
    triage = parse_triage(text, _display(path))
    header: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines) and (not lines[i].strip() or lines[i].lstrip().startswith("#")):
        header.append(lines[i])
        i += 1
    for j in range(i, len(lines)):
        if lines[j].lstrip().startswith("#"):
            raise EcosystemError(f"{_display(path)}:{j + 1}: cannot sort a file with comments between entries")
    while header and not header[-1].strip():
        header.pop()
    path.write_text(format_triage(list(triage.entries.values()), header or None), encoding="utf-8")
    return len(triage.entries)


# --------------------------------------------------------------------------------------------------
# running shardlint


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


# --------------------------------------------------------------------------------------------------
# comparison and report


@dataclasses.dataclass
class RepoReport:
    result: RunResult
    true: list[Finding] = dataclasses.field(default_factory=list)
    false: list[tuple[Finding, TriageEntry]] = dataclasses.field(default_factory=list)
    untriaged: list[Finding] = dataclasses.field(default_factory=list)  # absent from the triage or `?`
    gone: list[TriageEntry] = dataclasses.field(default_factory=list)

    @property
    def repo(self) -> str:
        return self.result.repo


def compare(result: RunResult, triage: Triage) -> RepoReport:
    """Matches one repository's findings with its triage entries by (repo, path, line, code)."""
    report = RepoReport(result)
    produced: set[Key] = set()
    for finding in result.findings:
        produced.add(finding.key)
        entry = triage.entries.get(finding.key)
        if entry is None or entry.verdict == "?":
            report.untriaged.append(finding)
        elif entry.verdict == "true":
            report.true.append(finding)
        else:
            report.false.append((finding, entry))
    if result.status == "ok":  # a repository that did not run says nothing about its triage
        report.gone = sorted(
            (e for e in triage.for_repo(result.repo) if e.key not in produced), key=lambda e: e.key
        )
    return report


@dataclasses.dataclass
class Summary:
    reports: list[RepoReport]
    skip_missing: bool = False
    unknown_repo_entries: list[TriageEntry] = dataclasses.field(default_factory=list)

    def count(self, attr: str) -> int:
        return sum(len(getattr(r, attr)) for r in self.reports)

    def with_status(self, status: str) -> list[RepoReport]:
        return [r for r in self.reports if r.result.status == status]

    def exit_status(self) -> int:
        if self.count("false") or self.count("untriaged") or self.unknown_repo_entries:
            return EXIT_FAIL
        if self.with_status("error") or self.with_status("timeout"):
            return EXIT_FAIL
        if self.with_status("missing") and not self.skip_missing:
            return EXIT_FAIL
        return EXIT_OK


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word[:-1] + 'ies' if word.endswith('y') else word + 's'}"


def _loc(f: Finding | TriageEntry) -> str:
    return f"{f.repo}  {f.path}:{f.line}  {f.code}"


def _one_line(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def render_report(summary: Summary, triage_source: str = "triage.tsv") -> str:
    out: list[str] = []
    width = max([len("repo"), len("total")] + [len(r.repo) for r in summary.reports])
    head = f"{'repo':<{width}}  {'status':<8} {'findings':>8} {'true':>5} {'false':>5} {'untriaged':>9} {'gone':>5} {'time':>9}"
    out.append(head)
    out.append("-" * len(head))
    total_time = 0.0
    for r in summary.reports:
        res = r.result
        total_time += res.seconds
        time_text = f"{res.seconds:8.1f}s" if res.status != "missing" else f"{'-':>9}"
        if res.status == "ok":
            counts = f"{len(res.findings):>8} {len(r.true):>5} {len(r.false):>5} {len(r.untriaged):>9} {len(r.gone):>5}"
        else:
            counts = f"{'-':>8} {'-':>5} {'-':>5} {'-':>9} {'-':>5}"
        out.append(f"{r.repo:<{width}}  {res.status:<8} {counts} {time_text}")
    out.append("-" * len(head))
    total_findings = sum(len(r.result.findings) for r in summary.reports)
    out.append(
        f"{'total':<{width}}  {'':<8} {total_findings:>8} {summary.count('true'):>5} {summary.count('false'):>5} "
        f"{summary.count('untriaged'):>9} {summary.count('gone'):>5} {total_time:8.1f}s"
    )

    false = [p for r in summary.reports for p in r.false]
    if false:
        out += ["", f"FALSE findings ({len(false)}): triaged as wrong; fix the rule so they go away, or correct the triage:"]
        for finding, entry in false:
            out.append(f"  {_loc(finding)}  ({triage_source}:{entry.lineno}: {entry.why})")
    untriaged = [f for r in summary.reports for f in r.untriaged]
    if untriaged:
        out += ["", f"UNTRIAGED findings ({len(untriaged)}): add a line to {triage_source} for each "
                "(--write-untriaged FILE drafts them):"]
        for f in untriaged:
            out.append(f"  {_loc(f)}  {_one_line(f.message)}")
    gone = [e for r in summary.reports for e in r.gone]
    if gone:
        out += ["", f"GONE ({len(gone)}): triaged but no longer reported; prune these lines from {triage_source} "
                "(not a failure):"]
        for e in gone:
            out.append(f"  {triage_source}:{e.lineno}  {_loc(e)}  ({e.verdict})")
    if summary.unknown_repo_entries:
        out += ["", f"UNKNOWN REPOSITORIES ({len(summary.unknown_repo_entries)}): triage lines for a name repos.toml "
                "does not list:"]
        for e in summary.unknown_repo_entries:
            out.append(f"  {triage_source}:{e.lineno}  {_loc(e)}")
    problems = [r for r in summary.reports if r.result.status != "ok"]
    if problems:
        out += ["", "NOT LINTED:"]
        for r in problems:
            note = " (ignored: --skip-missing)" if r.result.status == "missing" and summary.skip_missing else ""
            out.append(f"  {r.repo}: {r.result.status}{note}: {r.result.detail}")
    unrecorded = [r.repo for r in summary.reports if r.result.status == "ok" and not r.result.commit_recorded]
    if unrecorded:
        out += ["", f"note: no commit record (CACHE/NAME.commit) for {', '.join(unrecorded)}; "
                "assumed to be at the pinned commit"]

    out.append("")
    status = summary.exit_status()
    reasons = []
    for label, n in (("false", summary.count("false")), ("untriaged", summary.count("untriaged")),
                     ("with unknown repository", len(summary.unknown_repo_entries))):
        if n:
            reasons.append(f"{n} {label}")
    for st, label in (("error", "failed"), ("timeout", "timed out"), ("missing", "missing")):
        n = len(summary.with_status(st))
        if n and not (st == "missing" and summary.skip_missing):
            reasons.append(f"{_plural(n, 'repository')} {label}")
    if status == EXIT_OK:
        linted = len(summary.with_status("ok"))
        out.append(f"OK: {_plural(total_findings, 'finding')} in {_plural(linted, 'repository')}, "
                   "every one triaged true")
    else:
        out.append("FAIL: " + ", ".join(reasons))
    return "\n".join(out) + "\n"


def summary_json(summary: Summary) -> dict:
    def finding(f: Finding) -> dict:
        return {"repo": f.repo, "path": f.path, "line": f.line, "code": f.code, "message": f.message}

    def entry(e: TriageEntry) -> dict:
        return {"repo": e.repo, "path": e.path, "line": e.line, "code": e.code, "verdict": e.verdict,
                "why": e.why, "triage_line": e.lineno}

    return {
        "exit_status": summary.exit_status(),
        "repos": [
            {"name": r.repo, "status": r.result.status, "seconds": round(r.result.seconds, 3),
             "findings": len(r.result.findings), "files_checked": r.result.files_checked,
             "true": len(r.true), "false": len(r.false), "untriaged": len(r.untriaged), "gone": len(r.gone),
             "detail": r.result.detail}
            for r in summary.reports
        ],
        "false": [dict(finding(f), why=e.why) for r in summary.reports for f, e in r.false],
        "untriaged": [finding(f) for r in summary.reports for f in r.untriaged],
        "gone": [entry(e) for r in summary.reports for e in r.gone],
        "unknown_repo_entries": [entry(e) for e in summary.unknown_repo_entries],
    }


def write_untriaged(path: Path, summary: Summary) -> int:
    """Appends the untriaged findings to `path` as triage lines with verdict `?` (one per key, sorted,
    skipping keys the file already has). Returns how many lines were added."""
    existing: set[Key] = set()
    text = ""
    if path.exists():
        text = path.read_text(encoding="utf-8")
        existing = set(parse_triage(text, _display(path)).entries)
    new: dict[Key, TriageEntry] = {}
    for r in summary.reports:
        for f in r.untriaged:
            if f.key in existing or f.key in new:
                continue
            why = f"TODO {f.name}".strip()
            new[f.key] = TriageEntry(f.repo, f.path, f.line, f.code, "?", why, 0)
    if not new:
        return 0
    lines = [e.to_line() for e in sorted(new.values(), key=lambda e: e.key)]
    with open(path, "a", encoding="utf-8") as out:
        if not text.strip():
            out.write(TRIAGE_HEADER + "\n")
        elif not text.endswith("\n"):
            out.write("\n")
        out.write("\n".join(lines) + "\n")
    return len(new)


# --------------------------------------------------------------------------------------------------
# obtaining checkouts


def _git_env(offline: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    env["GIT_TERMINAL_PROMPT"] = "0"
    if offline:
        env["GIT_NO_LAZY_FETCH"] = "1"  # a partial clone must not fetch what it lacks (git >= 2.44)
    return env


def _git(args: list[str], offline: bool = False) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", *args], env=_git_env(offline), capture_output=True)
    except OSError as e:
        raise EcosystemError(f"cannot run git: {e.strerror or e}") from e


def _prepare_dest(cache: Path, repo: Repo) -> Path | None:
    """Returns the checkout path to fill, or None when it is already there at the pinned commit."""
    dest = cache / repo.name
    record = commit_record(cache, repo.name)
    if dest.exists():
        if record.is_file() and record.read_text(encoding="utf-8").strip() == repo.commit:
            return None
        raise EcosystemError(
            f"{dest} already exists (at an unrecorded or other commit); remove it and {record.name} to obtain it again"
        )
    cache.mkdir(parents=True, exist_ok=True)
    return dest


def fetch_repo(repo: Repo, cache: Path) -> str:
    """git clone + git checkout COMMIT into CACHE/NAME (needs the network for a remote URL)."""
    dest = _prepare_dest(cache, repo)
    if dest is None:
        return f"{repo.name}: already at {repo.commit[:12]}"
    tmp = Path(tempfile.mkdtemp(prefix=f".{repo.name}.fetch-", dir=cache))
    try:
        work = tmp / repo.name
        clone = _git(["clone", "--quiet", "--no-checkout", "--filter=blob:none", repo.url, str(work)])
        if clone.returncode != 0:
            raise EcosystemError(f"git clone {repo.url} failed: {_tail(clone.stderr)}")
        checkout = _git(["-C", str(work), "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach",
                         repo.commit])
        if checkout.returncode != 0:
            raise EcosystemError(f"git checkout {repo.commit} failed: {_tail(checkout.stderr)}")
        work.rename(dest)
        commit_record(cache, repo.name).write_text(repo.commit + "\n", encoding="utf-8")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return f"{repo.name}: cloned {repo.url} at {repo.commit[:12]} into {dest}"


@dataclasses.dataclass
class Extracted:
    files: int = 0
    symlinks: int = 0
    missing: list[str] = dataclasses.field(default_factory=list)
    other: int = 0  # submodules (gitlinks) and unsafe paths


def extract_tree(git_dir: Path, commit: str, dest: Path) -> Extracted:
    """Writes the tree of `commit` from a (bare) git directory into `dest` without a work tree or
    `git archive`: `git ls-tree -r -z` lists it, `git cat-file --batch` reads the blobs. Symlinks and
    blobs the git directory does not have are skipped. Only reads `git_dir`."""
    base = ["--git-dir", str(git_dir), "-c", "protocol.allow=never"]  # never fetch a missing object
    found = _git([*base, "cat-file", "-e", f"{commit}^{{commit}}"], offline=True)
    if found.returncode != 0:
        raise EcosystemError(f"{git_dir} does not have commit {commit}: {_tail(found.stderr) or 'not found'}")
    listing = _git([*base, "ls-tree", "-r", "-z", "--full-tree", commit], offline=True)
    if listing.returncode != 0:
        raise EcosystemError(f"git ls-tree {commit} in {git_dir} failed: {_tail(listing.stderr)}")
    stats = Extracted()
    blobs: list[tuple[bytes, bytes, str]] = []
    for record in listing.stdout.split(b"\0"):
        if not record:
            continue
        meta, _, raw_path = record.partition(b"\t")
        mode, kind, sha = meta.split(b" ")
        path = os.fsdecode(raw_path)
        parts = path.split("/")
        if mode == b"120000":
            stats.symlinks += 1
        elif kind != b"blob" or any(p in ("", ".", "..", ".git") for p in parts):
            stats.other += 1
        else:
            blobs.append((mode, sha, path))
    dest.mkdir(parents=True)
    proc = subprocess.Popen(["git", *base, "cat-file", "--batch"], env=_git_env(offline=True), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None

    def feed() -> None:  # a writer thread, so requests and replies stream without a round trip each
        try:
            for _, sha, _ in blobs:
                proc.stdin.write(sha + b"\n")
            proc.stdin.close()
        except (BrokenPipeError, ValueError):
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        for mode, sha, path in blobs:
            header = proc.stdout.readline().split()
            if len(header) == 2 and header[1] == b"missing":
                stats.missing.append(path)
                continue
            if len(header) != 3:
                raise EcosystemError(f"git cat-file --batch: unexpected reply {header!r} for {path}")
            size = int(header[2])
            data = proc.stdout.read(size)
            proc.stdout.read(1)  # the newline after the contents
            if len(data) != size:
                raise EcosystemError(f"git cat-file --batch: short read for {path}")
            target = dest.joinpath(*path.split("/"))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            if mode == b"100755":
                target.chmod(0o755)
            stats.files += 1
    finally:
        if proc.poll() is None and writer.is_alive():
            proc.kill()
        writer.join()
        proc.stdout.close()
        proc.wait()
    return stats


def extract_repo(repo: Repo, cache: Path, git_dir: Path) -> str:
    dest = _prepare_dest(cache, repo)
    if dest is None:
        return f"{repo.name}: already at {repo.commit[:12]}"
    tmp = Path(tempfile.mkdtemp(prefix=f".{repo.name}.extract-", dir=cache))
    try:
        stats = extract_tree(git_dir, repo.commit, tmp / repo.name)
        (tmp / repo.name).rename(dest)
        commit_record(cache, repo.name).write_text(repo.commit + "\n", encoding="utf-8")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = f"{repo.name}: extracted {stats.files} files at {repo.commit[:12]} from {git_dir} into {dest}"
    skipped = []
    if stats.symlinks:
        skipped.append(f"{stats.symlinks} symlinks")
    if stats.missing:
        skipped.append(f"{len(stats.missing)} blobs the git directory lacks ({', '.join(stats.missing[:5])}"
                       f"{', ...' if len(stats.missing) > 5 else ''})")
    if stats.other:
        skipped.append(f"{stats.other} submodules or unsafe paths")
    if skipped:
        text += "; skipped " + ", ".join(skipped)
    return text


# --------------------------------------------------------------------------------------------------
# command line


def _display(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def default_cache() -> Path:
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else DEFAULT_CACHE.expanduser()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ecosystem/check.py",
        description="Lint pinned checkouts of public repositories with shardlint and compare the findings "
        "with the committed triage. Exit 0: every finding is triaged true; 1: a false or untriaged finding, "
        "or a repository that could not be linted; 2: bad input.",
        epilog="Recall: ecosystem/mutate.py --cache DIR [--shardlint BIN] is the mutation check (moves the optimizer "
        "above the FSDP wrap in real scripts listed in ecosystem/mutations.json and requires SL101).",
    )
    p.add_argument("--cache", type=Path, default=None,
                   help=f"folder of checkouts, CACHE/NAME/ (default: ${CACHE_ENV}, else {DEFAULT_CACHE})")
    p.add_argument("--shardlint", type=Path, default=DEFAULT_SHARDLINT,
                   help="the shardlint binary (default: build/shardlint of this repository)")
    p.add_argument("--repo", action="append", default=[], metavar="NAME",
                   help="only this repository (repeatable)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="per repository; a timeout fails that repository, the others still run")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="repositories linted at once (default 1; shardlint itself uses all cores)")
    p.add_argument("--skip-missing", action="store_true",
                   help="repositories missing from the cache do not fail the check")
    p.add_argument("--write-untriaged", type=Path, metavar="FILE",
                   help="append untriaged findings to FILE as triage lines with verdict '?'")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write a JSON summary to FILE")
    p.add_argument("--invariant", action="store_true",
                   help="also check one answer per file: every file with a finding and a sample of the others give "
                        "the same findings alone, with their folder and through `shardlint server` (invariant.py)")
    p.add_argument("--invariant-sample", type=int, default=200, metavar="N",
                   help="--invariant: Python files sampled per repository besides those with findings (default 200)")
    p.add_argument("--repos-file", type=Path, default=DEFAULT_REPOS, help=argparse.SUPPRESS)
    p.add_argument("--triage", type=Path, default=DEFAULT_TRIAGE, help="the triage file (default: ecosystem/triage.tsv)")
    p.add_argument("--sort-triage", action="store_true", help="rewrite the triage file sorted, then exit")
    obtain = p.add_argument_group("obtaining checkouts (then exit)")
    obtain.add_argument("--fetch", action="store_true",
                        help="git clone each selected repository into the cache and check out the pinned commit "
                        "(NETWORK); present checkouts at the pinned commit are kept")
    obtain.add_argument("--from-git-dir", action="append", default=[], metavar="NAME=GITDIR",
                        help="extract NAME's tree at the pinned commit from a local (bare) git directory; "
                        "symlinks and absent blobs are skipped; the git directory is only read")
    return p


def select_repos(repos: list[Repo], names: list[str]) -> list[Repo]:
    known = {r.name for r in repos}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise EcosystemError(f"unknown repository {', '.join(unknown)}; repos.toml lists {', '.join(sorted(known))}")
    return [r for r in repos if not names or r.name in names]


def run_check(args, repos: list[Repo], selected: list[Repo], triage: Triage, cache: Path) -> Summary:
    shardlint = args.shardlint
    if not (shardlint.is_file() and os.access(shardlint, os.X_OK)):
        raise EcosystemError(f"shardlint binary not found or not executable: {shardlint} (build it, or pass --shardlint)")
    shardlint = shardlint.resolve()
    results: dict[str, RunResult] = {}
    done = 0

    def progress(res: RunResult) -> None:
        nonlocal done
        done += 1
        what = f"{len(res.findings)} findings" if res.status == "ok" else res.status
        print(f"[{done}/{len(selected)}] {res.repo}: {what} ({res.seconds:.1f} s)", file=sys.stderr, flush=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(check_repo, shardlint, r, cache, args.timeout): r for r in selected}
        for fut in concurrent.futures.as_completed(futures):
            res = fut.result()
            results[res.repo] = res
            progress(res)
    reports = [compare(results[r.name], triage) for r in selected]
    known = {r.name for r in repos}
    unknown = sorted((e for e in triage.entries.values() if e.repo not in known), key=lambda e: e.lineno)
    return Summary(reports, args.skip_missing, unknown)


def obtain(args, repos: list[Repo], selected: list[Repo], cache: Path) -> int:
    """--from-git-dir and --fetch: each repository on its own; one failing does not stop the others."""
    by_name = {r.name: r for r in repos}
    jobs = []
    for spec in args.from_git_dir:
        name, sep, git_dir = spec.partition("=")
        if not sep or not name or not git_dir:
            raise EcosystemError(f"--from-git-dir wants NAME=GITDIR, got {spec!r}")
        if name not in by_name:
            raise EcosystemError(f"--from-git-dir: unknown repository {name!r}")
        jobs.append((by_name[name], lambda r, d=Path(git_dir).expanduser(): extract_repo(r, cache, d)))
    if args.fetch:
        jobs += [(r, lambda r: fetch_repo(r, cache)) for r in selected]
    failed = 0
    for repo, action in jobs:
        try:
            print(action(repo), flush=True)
        except EcosystemError as e:
            failed += 1
            print(f"error: {repo.name}: {e}", file=sys.stderr, flush=True)
    return EXIT_FAIL if failed else EXIT_OK


def shardlint_version(shardlint: Path) -> str:
    """` (shardlint X.Y.Z)` for the report header, or nothing when `--version` does not answer."""
    try:
        proc = subprocess.run([str(shardlint), "--version"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    first = proc.stdout.decode("utf-8", "replace").strip().split("\n")[0]
    return f" ({first})" if proc.returncode == 0 and first else ""


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        repos = load_repos(args.repos_file)
        selected = select_repos(repos, args.repo)
        cache = (args.cache or default_cache()).expanduser()
        if args.sort_triage:
            n = sort_triage_file(args.triage)
            print(f"{_display(args.triage)}: {n} entries, sorted")
            return EXIT_OK
        if args.fetch or args.from_git_dir:
            return obtain(args, repos, selected, cache)
        triage = load_triage(args.triage)
        if args.jobs < 1:
            raise EcosystemError("--jobs must be at least 1")
        if args.timeout is not None and args.timeout <= 0:
            raise EcosystemError("--timeout must be positive")
        print(f"shardlint ecosystem check: {_plural(len(selected), 'repository')} from {cache}, "
              f"shardlint {args.shardlint}{shardlint_version(args.shardlint)}, "
              f"triage {_display(args.triage)} ({len(triage.entries)} entries)", flush=True)
        summary = run_check(args, repos, selected, triage, cache)
    except EcosystemError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    print()
    sys.stdout.write(render_report(summary, _display(args.triage)))
    if triage.first_unsorted is not None:
        print(f"note: {_display(args.triage)} is not sorted from line {triage.first_unsorted} on "
              "(--sort-triage sorts it)")
    if args.write_untriaged:
        try:
            n = write_untriaged(args.write_untriaged, summary)
        except EcosystemError as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_USAGE
        print(f"{_display(args.write_untriaged)}: {n} untriaged findings appended with verdict '?'")
    if args.json:
        args.json.write_text(json.dumps(summary_json(summary), indent=2) + "\n", encoding="utf-8")
    status = summary.exit_status()
    if args.invariant:
        status = max(status, run_invariant(args, selected, cache))
    return status


def run_invariant(args, selected: list[Repo], cache: Path) -> int:
    """--invariant: prints one line per repository and every difference; EXIT_FAIL when any."""
    from invariant import check_invariant  # beside this file

    shardlint = args.shardlint.resolve()
    print("\nOne answer per file (alone, with its folder, through the server, against the whole repository):")
    bad = 0
    files = 0
    for repo in selected:
        checkout = cache / repo.name
        if not checkout.is_dir():
            continue
        res = check_invariant(shardlint, repo.name, checkout, args.invariant_sample, args.timeout)
        files += res.files
        state = "ok" if not res.mismatches and not res.errors else f"{len(res.mismatches) + len(res.errors)} problems"
        print(f"  {repo.name:<34} {res.files:>4} files  {state}  ({res.seconds:.1f} s)", flush=True)
        for line in res.errors + res.mismatches:
            print(f"    {line}")
        bad += len(res.mismatches) + len(res.errors)
    print(f"{'FAILED' if bad else 'OK'}: {files} files in {len(selected)} repositories, {bad} differences")
    return EXIT_FAIL if bad else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
