"""Obtaining checkouts: git clone (--fetch) or extraction from a local git directory (--from-git-dir)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from .common import EcosystemError
from .repos import Repo
from .lint import _tail, commit_record


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
