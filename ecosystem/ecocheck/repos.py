"""repos.toml: the repositories and their pinned commits."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

from .common import COMMIT_RE, EcosystemError, NAME_RE


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
