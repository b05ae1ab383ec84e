#!/usr/bin/env python3
"""shardlint mutation check (recall on real code).

For each entry of ecosystem/mutations.json (a real training script at a pinned commit that builds its
optimizer AFTER wrapping the model: FSDP(...), fully_shard(...), Fabric setup/setup_module), this script
makes a mutant that builds the optimizer BEFORE the wrap: the optimizer statement (with its continuation
lines, or a whole compound statement, plus `statements - 1` following sibling statements) is cut and
pasted just before the wrap statement, re-indented to the wrap statement's indentation. shardlint must
report the entry's expected code (SL101) on the mutant and no SL101/SL102/SL103/SL402 on the original.

The checkout in the cache is never written: the repository is copied into a temporary folder (hard links
where the file system allows, else copies), the file is replaced there by the mutant (the link is removed
first, so the cached file is untouched), and shardlint runs there with `--no-cache`, so the mutant's
imports and project (pyproject, configs, sibling modules) resolve as for the original.

    python3 ecosystem/mutate.py --cache DIR [--shardlint BIN] [--repo NAME] [--json FILE] [--keep DIR]

Exit 0: every mutant is caught and every original is clean; 1: otherwise (or shardlint failed on one);
2: bad input. See ecosystem/README.md ("Mutation check"). Standard library only (Python >= 3.11).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check  # noqa: E402  (repos.toml loading, cache resolution, the same conventions)

HERE = Path(__file__).resolve().parent
DEFAULT_MUTATIONS = HERE / "mutations.json"
# Codes that must not be reported on a correct original (the ordering rules and accelerate's FSDP1 one).
ORDER_CODES = ("SL101", "SL102", "SL103", "SL402")
FIELDS_REQUIRED = ("repo", "path", "commit", "wrap_api", "optimizer", "wrap", "expected", "note")
FIELDS_OPTIONAL = ("optimizer_line", "wrap_line", "statements", "rewrite", "setting", "setting_path", "drop")


class MutationError(Exception):
    """A mutation that cannot be made (snippet not found, mutant does not parse): fails that entry."""


@dataclasses.dataclass
class Entry:
    repo: str
    path: str
    commit: str
    wrap_api: str
    optimizer: str
    wrap: str
    expected: str
    note: str
    optimizer_line: int | None = None
    wrap_line: int | None = None
    statements: int = 1
    rewrite: list[str] | None = None
    setting: list[str] | None = None
    setting_path: str | None = None  # the file `setting` edits, when not the script (a config module)
    drop: str | None = None  # a whole line removed from the mutant (the original's `optimizer = None` reset)


def load_mutations(path: Path) -> list[Entry]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise check.EcosystemError(f"{path}: cannot read: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise check.EcosystemError(f"{path}: not valid JSON: {e}") from e
    items = data.get("mutations") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise check.EcosystemError(f'{path}: expected {{"mutations": [ ... ]}} with at least one entry')
    out = []
    for i, item in enumerate(items, 1):
        where = f"{path}: mutation #{i}"
        if not isinstance(item, dict):
            raise check.EcosystemError(f"{where}: not an object")
        missing = [k for k in FIELDS_REQUIRED if k not in item]
        unknown = sorted(set(item) - set(FIELDS_REQUIRED) - set(FIELDS_OPTIONAL))
        if missing or unknown:
            raise check.EcosystemError(f"{where}: missing keys {missing}, unknown keys {unknown}")
        if not check.COMMIT_RE.match(str(item["commit"])):
            raise check.EcosystemError(f"{where}: commit must be 40 lowercase hex digits")
        if not check.CODE_RE.match(str(item["expected"])):
            raise check.EcosystemError(f"{where}: expected must be a code like SL101")
        for key in ("rewrite", "setting"):
            rw = item.get(key)
            if rw is not None and not (isinstance(rw, list) and len(rw) == 2 and all(isinstance(s, str) for s in rw)):
                raise check.EcosystemError(f"{where}: {key} must be [old, new]")
        drop = item.get("drop")
        if drop is not None and not (isinstance(drop, str) and drop.strip() == drop and drop):
            raise check.EcosystemError(f"{where}: drop must be a statement's text without surrounding spaces")
        out.append(Entry(**item))
    return out


# --------------------------------------------------------------------------------------------------
# the mutation


def find_line(lines: list[str], snippet: str, line: int | None, what: str) -> int:
    """1-based line holding `snippet`: the only one, or the given `line` (which must hold it)."""
    hits = [i + 1 for i, text in enumerate(lines) if snippet in text]
    if line is not None:
        if line not in hits:
            raise MutationError(f"{what} snippet {snippet!r} is not on line {line} (found on {hits or 'no line'})")
        return line
    if len(hits) != 1:
        raise MutationError(f"{what} snippet {snippet!r} found on {len(hits)} lines {hits[:8]}; give {what}_line")
    return hits[0]


def statement_at(tree: ast.AST, line: int) -> tuple[list[ast.stmt], int]:
    """The statement starting on `line` (the outermost one) with the body list that holds it."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody", "handlers"):
            body = getattr(node, field, None)
            if not isinstance(body, list):
                continue
            for idx, stmt in enumerate(body):
                if isinstance(stmt, ast.stmt) and stmt.lineno == line:
                    return body, idx
    raise MutationError(f"no statement starts on line {line}")


def indent_of(text: str) -> str:
    return text[: len(text) - len(text.lstrip())]


def mutate(source: str, e: Entry) -> tuple[str, str]:
    """The mutant's text and a one-line description of the move."""
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        raise MutationError(f"the original does not parse: {err}") from err
    lines = source.splitlines(keepends=True)
    opt_line = find_line(lines, e.optimizer, e.optimizer_line, "optimizer")
    wrap_line = find_line(lines, e.wrap, e.wrap_line, "wrap")
    body, idx = statement_at(tree, opt_line)
    if idx + e.statements > len(body):
        raise MutationError(f"only {len(body) - idx} statements from line {opt_line} in that block")
    first, last = body[idx], body[idx + e.statements - 1]
    start, end = first.lineno, last.end_lineno  # 1-based, inclusive
    statement_at(tree, wrap_line)  # the wrap snippet must start a statement
    if start <= wrap_line <= end:
        raise MutationError("the wrap statement is inside the optimizer statement")
    if wrap_line > start:
        raise MutationError(f"the optimizer (line {start}) already comes before the wrap (line {wrap_line})")
    block = lines[start - 1 : end]
    old_indent, new_indent = indent_of(lines[start - 1]), indent_of(lines[wrap_line - 1])
    moved = []
    for text in block:
        if text.strip() and text.startswith(old_indent):
            text = new_indent + text[len(old_indent) :]
        elif text.strip():
            raise MutationError(f"a moved line is indented less than the statement: {text!r}")
        moved.append(text)
    if e.rewrite:
        old, new = e.rewrite
        joined = "".join(moved)
        if old not in joined:
            raise MutationError(f"rewrite: {old!r} not in the moved statement")
        moved = [joined.replace(old, new)]
    if moved and not moved[-1].endswith("\n"):
        moved[-1] += "\n"
    rest = lines[: start - 1] + lines[end:]
    out = rest[: wrap_line - 1] + moved + rest[wrap_line - 1 :]
    if e.drop:
        # A statement of the original that resets what moved (`optimizer = None` before the optimizer's
        # place): a user who builds the optimizer before the wrap does not write it after the wrap.
        hits = [i for i, text in enumerate(out) if text.strip() == e.drop]
        if len(hits) != 1:
            raise MutationError(f"drop: {e.drop!r} is {len(hits)} whole lines of the mutant, not one")
        del out[hits[0]]
    mutant = "".join(out)
    try:
        ast.parse(mutant)
    except SyntaxError as err:
        raise MutationError(f"the mutant does not parse: {err}") from err
    return mutant, f"lines {start}-{end} moved above line {wrap_line}"


# --------------------------------------------------------------------------------------------------
# running shardlint


def copy_tree(src: Path, dst: Path) -> None:
    """Copy src to dst with hard links (same file system), else plain copies; symlinks stay links."""

    def link_or_copy(s, d):
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)

    shutil.copytree(src, dst, symlinks=True, copy_function=link_or_copy,
                    ignore=shutil.ignore_patterns(".git", ".shardlint_cache"))


def lint(shardlint: Path, root: Path, rel: str, timeout: float | None) -> list[dict]:
    cmd = [str(shardlint), "check", rel, "--format", "json", "--no-cache"]
    try:
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as err:
        raise MutationError(f"shardlint timed out after {timeout} s") from err
    if proc.returncode not in (0, 1):
        meaning = check.SHARDLINT_EXIT_MEANING.get(proc.returncode, "error")
        raise MutationError(f"shardlint exit {proc.returncode} ({meaning}): {proc.stderr.strip()[:300]}")
    try:
        return json.loads(proc.stdout)["findings"]
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise MutationError(f"shardlint output is not the JSON report: {proc.stdout[:200]!r}") from err


def finding_key(f: dict) -> str:
    loc = f.get("location") or f.get("range") or {}
    line = f.get("line") or loc.get("line") or (loc.get("start") or {}).get("line") or "?"
    return f"{f.get('code', '?')}@{line}"


def describe(findings: list[dict]) -> str:
    return ", ".join(finding_key(f) for f in findings) or "-"


@dataclasses.dataclass
class Result:
    entry: Entry
    verdict: str  # caught / missed / original-not-clean / error
    original: str = "-"
    mutant: str = "-"
    move: str = ""
    detail: str = ""


def run_entry(e: Entry, cache: Path, shardlint: Path, timeout: float | None, keep: Path | None) -> Result:
    checkout = cache / e.repo
    if not checkout.is_dir():
        return Result(e, "error", detail=f"{checkout} is missing (see check.py --fetch / --from-git-dir)")
    record = cache / f"{e.repo}.commit"
    if record.is_file() and record.read_text().strip() != e.commit:
        return Result(e, "error", detail=f"{record} names {record.read_text().strip()}, the entry {e.commit}")
    src = checkout / e.path
    try:
        pristine = source = src.read_text(encoding="utf-8")
        setting_file = None  # (path in the repository, its text under the setting)
        if e.setting:  # a configuration under which the mutant is a bug; applied to the original too
            old, new = e.setting
            where = e.setting_path or e.path
            text = source if where == e.path else (checkout / where).read_text(encoding="utf-8")
            if text.count(old) != 1:
                raise MutationError(f"setting: {old!r} occurs {text.count(old)} times in {where}, not once")
            if where == e.path:
                source = source.replace(old, new)
            else:
                setting_file = (where, text.replace(old, new))
        mutant, move = mutate(source, e)
    except (OSError, MutationError) as err:
        return Result(e, "error", detail=str(err))
    tmp = Path(tempfile.mkdtemp(prefix=f"shardlint-mutant-{e.repo}-"))
    try:
        root = tmp / e.repo
        copy_tree(checkout, root)
        original = [f for f in lint(shardlint, root, e.path, timeout) if f.get("code") in ORDER_CODES]
        target = root / e.path
        target.unlink()  # a hard link to the cached file: unlink, never write through it
        if setting_file:
            other = root / setting_file[0]
            other.unlink()
            other.write_text(setting_file[1], encoding="utf-8")
        if source != pristine or setting_file:  # the original under the entry's setting must be clean too
            target.write_text(source, encoding="utf-8")
            original += [f for f in lint(shardlint, root, e.path, timeout) if f.get("code") in ORDER_CODES]
        target.write_text(mutant, encoding="utf-8")
        found = [f for f in lint(shardlint, root, e.path, timeout) if f.get("code") in ORDER_CODES]
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(target, keep / f"{e.repo}__{e.path.replace('/', '__')}")
    except (OSError, MutationError) as err:
        return Result(e, "error", move=move, detail=str(err))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if original:
        verdict = "original-not-clean"
    elif any(f.get("code") == e.expected for f in found):
        verdict = "caught"
    else:
        verdict = "missed"
    return Result(e, verdict, describe(original), describe(found), move)


# --------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ecosystem/mutate.py",
        description="Mutation check: in real training scripts (ecosystem/mutations.json) move the optimizer's "
        "construction above the FSDP wrap and require shardlint to report it (SL101), and nothing on the "
        "original. Exit 0: every mutant caught and every original clean; 1: otherwise; 2: bad input.",
    )
    p.add_argument("--cache", type=Path, default=None,
                   help=f"folder of checkouts, CACHE/NAME/ (default: ${check.CACHE_ENV}, else {check.DEFAULT_CACHE})")
    p.add_argument("--shardlint", type=Path, default=check.DEFAULT_SHARDLINT,
                   help="the shardlint binary (default: build/shardlint of this repository)")
    p.add_argument("--mutations", type=Path, default=DEFAULT_MUTATIONS,
                   help="the list of mutations (default: ecosystem/mutations.json)")
    p.add_argument("--repo", action="append", default=[], metavar="NAME", help="only this repository (repeatable)")
    p.add_argument("--timeout", type=float, default=300, metavar="SECONDS", help="per shardlint run (default 300)")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    p.add_argument("--keep", type=Path, metavar="DIR", help="also copy each mutant into DIR, to read it")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        entries = load_mutations(args.mutations)
        repos = {r.name: r for r in check.load_repos(check.DEFAULT_REPOS)}
        for e in entries:
            if e.repo not in repos:
                raise check.EcosystemError(f"{args.mutations}: {e.repo} is not in repos.toml")
            if repos[e.repo].commit != e.commit:
                raise check.EcosystemError(f"{args.mutations}: {e.repo} {e.path}: commit {e.commit} is not "
                                           f"repos.toml's {repos[e.repo].commit}")
        if args.repo:
            entries = [e for e in entries if e.repo in args.repo]
        cache = args.cache.expanduser() if args.cache else check.default_cache()
        if not args.shardlint.is_file():
            raise check.EcosystemError(f"{args.shardlint}: no shardlint binary (build it, or pass --shardlint)")
    except check.EcosystemError as err:
        print(f"error: {err}", file=sys.stderr)
        return check.EXIT_USAGE
    results = [run_entry(e, cache, args.shardlint.resolve(), args.timeout, args.keep) for e in entries]
    header = ("script", "wrap API", "original", "mutant", "verdict")
    rows = [(f"{r.entry.repo}/{r.entry.path}", r.entry.wrap_api, r.original, r.mutant, r.verdict) for r in results]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    caught = sum(r.verdict == "caught" for r in results)
    print(f"\nscore: {caught}/{len(results)} mutants caught", end="")
    unclean = sum(r.verdict == "original-not-clean" for r in results)
    errors = [r for r in results if r.verdict == "error"]
    print(f"; {unclean} original(s) not clean; {len(errors)} error(s)")
    for r in results:
        if r.verdict == "error":
            print(f"ERROR {r.entry.repo}/{r.entry.path}: {r.detail}")
    if args.json:
        args.json.write_text(json.dumps([
            {**dataclasses.asdict(r.entry), "verdict": r.verdict, "original_findings": r.original,
             "mutant_findings": r.mutant, "move": r.move, "detail": r.detail} for r in results], indent=2) + "\n")
    return check.EXIT_OK if caught == len(results) else check.EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
