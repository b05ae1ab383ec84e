"""The command line of ecosystem/check.py: options, the check run, obtaining checkouts, --invariant."""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
from pathlib import Path

from .common import (
    CACHE_ENV, DEFAULT_CACHE, DEFAULT_REPOS, DEFAULT_SHARDLINT, DEFAULT_TRIAGE, EXIT_FAIL, EXIT_OK,
    EXIT_USAGE, EcosystemError, _display,
)
from .repos import Repo, load_repos
from .triage import Triage, load_triage, sort_triage_file
from .lint import RunResult, check_repo
from .report import Summary, _plural, compare, render_report, summary_json, write_untriaged
from .checkouts import extract_repo, fetch_repo


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
    from invariant import check_invariant  # ecosystem/invariant.py, beside check.py

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
