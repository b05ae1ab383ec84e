"""The triage file (triage.tsv): parsing, checking, formatting and sorting it."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from .common import (
    CODE_RE, EcosystemError, MAX_WHY, NAME_RE, TRIAGE_FIELDS, TRIAGE_HEADER, VERDICTS, _display,
)


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
