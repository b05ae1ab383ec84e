"""Paths, exit statuses, formats and the error for bad input, shared by the modules of the check."""

from __future__ import annotations

import re
from pathlib import Path


HERE = Path(__file__).resolve().parent.parent  # ecosystem/ (this file is in ecosystem/ecocheck/)
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


def _display(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
