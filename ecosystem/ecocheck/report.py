"""Comparing findings with the triage, the report, its JSON summary and the untriaged lines."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from .common import EXIT_FAIL, EXIT_OK, TRIAGE_HEADER, _display
from .triage import Key, Triage, TriageEntry, parse_triage
from .lint import Finding, RunResult


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
