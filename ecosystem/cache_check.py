#!/usr/bin/env python3
"""The cache on real code: a cached run says exactly what a run without the cache says.

For each repository checkout, runs `shardlint check . --format json` four times: with `--no-cache`, with a
fresh cache folder (outside the checkout: the checkouts are only read), and twice more with that folder (the
warm runs, the second with `--stats`). The four outputs must be byte-identical. The `--stats` line
"imports ..." says whether the warm run followed the imports as the cache says (its layout unchanged).

    python3 ecosystem/cache_check.py --cache /work/eco-cache [--shardlint BIN] [--repo NAME ...]

Exit status: 0 when every repository's outputs agree, 1 when one differs, 2 on a usage or setup error.
Standard library only; not part of CI (CI has no checkouts).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check  # noqa: E402  (repos.toml loading, cache resolution, the same conventions)


def run(shardlint: Path, checkout: Path, *extra: str, timeout: int) -> tuple[str, str]:
    proc = subprocess.run([str(shardlint), "check", ".", "--format", "json", *extra], cwd=checkout,
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode not in (0, 1):
        raise check.EcosystemError(f"{checkout}: shardlint exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    return proc.stdout, proc.stderr


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache", type=Path, default=None,
                   help=f"folder of checkouts, CACHE/NAME/ (default: ${check.CACHE_ENV}, else {check.DEFAULT_CACHE})")
    p.add_argument("--shardlint", type=Path, default=check.DEFAULT_SHARDLINT)
    p.add_argument("--repo", action="append", default=[], help="only this repository (repeatable)")
    p.add_argument("--timeout", type=int, default=900, help="seconds per shardlint run")
    args = p.parse_args(argv)
    try:
        repos = [r.name for r in check.load_repos(check.DEFAULT_REPOS)]
        unknown = sorted(set(args.repo) - set(repos))
        if unknown:
            raise check.EcosystemError(f"not in repos.toml: {', '.join(unknown)}")
        if args.repo:
            repos = [r for r in repos if r in args.repo]
        cache = args.cache.expanduser() if args.cache else check.default_cache()
        if not args.shardlint.is_file():
            raise check.EcosystemError(f"{args.shardlint}: no shardlint binary (build it, or pass --shardlint)")
        differ = 0
        with tempfile.TemporaryDirectory(prefix="shardlint-cache-check-") as tmp:
            for name in repos:
                checkout = cache / name
                if not checkout.is_dir():
                    print(f"{name}: missing ({checkout}; see check.py --fetch / --from-git-dir)")
                    continue
                folder = Path(tmp) / name
                started = time.monotonic()
                reference, _ = run(args.shardlint, checkout, "--no-cache", timeout=args.timeout)
                cold, _ = run(args.shardlint, checkout, "--cache-dir", str(folder), timeout=args.timeout)
                warm, _ = run(args.shardlint, checkout, "--cache-dir", str(folder), timeout=args.timeout)
                again, stats = run(args.shardlint, checkout, "--cache-dir", str(folder), "--stats",
                                   timeout=args.timeout)
                shutil.rmtree(folder, ignore_errors=True)
                same = reference == cold == warm == again
                differ += not same
                imports = next((line.strip() for line in stats.splitlines() if line.strip().startswith("imports ")),
                               "(no imports line: no layout kept)")
                print(f"{name}: {'same' if same else 'DIFFERENT'} ({time.monotonic() - started:.1f} s); {imports}",
                      flush=True)
        print(f"{'OK' if differ == 0 else 'FAILED'}: {differ} of {len(repos)} repositories differ with the cache")
        return 1 if differ else 0
    except (check.EcosystemError, subprocess.TimeoutExpired) as e:
        print(f"cache_check: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
