#!/usr/bin/env python3
"""The runtime probe against a real PyTorch (issue 28): every positive fixture of the probed rules
(SL101, SL102, SL103, SL104, SL201, SL202, SL402) is replayed on gloo/CPU ranks and must give the verdict its replay
predicts, with evidence read off the run.

    tests/probe_real.py --shardlint build/shardlint --python build/probe-venv/bin/python \
        [--table FILE] [--update-readme runtime_probe/README.md]

Expected verdicts (anything else fails the test):
- `confirmed` for every finding, except
- findings the replay cannot run here (`probe-error`: SL202's Trainer replay without transformers),
  listed in the table and allowed only for the reasons in NOT_REPLAYABLE_OK.

Then every `_ok` fixture of those rules is probed with `--controls`: the rules' controls (the
patterns they examined and found correct, where the replay can show why) must all be
`not-reproduced`; `_ok` fixtures without a control are listed in the table with the reason.

Exit 77 (ctest: skipped) when the interpreter has no torch: the probe environment is made by
scripts/setup-probe.sh. The table (Markdown) is what runtime_probe/README.md shows between the
`probe-table` markers; --update-readme rewrites it there.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RULES = ("SL101", "SL102", "SL103", "SL104", "SL201", "SL202", "SL402")
# Every positive fixture's shape is replayed today; SL202's Trainer replay needs transformers, and an
# interpreter without it gives `probe-error` with this reason (never a verdict on the finding).
NOT_REPLAYABLE_OK = ("transformers is not importable",)
BEGIN, END = "<!-- probe-table:begin -->", "<!-- probe-table:end -->"


def expected_verdict(probe: dict) -> str:
    # Every finding is expected to be confirmed: SL101 reports Lightning Fabric only with
    # use_orig_params=False (written in FSDPStrategy, or a Lightning before 2.1 that the project pins).
    return "confirmed"


def has_torch(python: str) -> bool:
    try:
        return subprocess.run([python, "-c", "import torch"], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def fixtures_of(ok: bool) -> list:
    files = []
    for code in RULES:
        files += [f for f in glob.glob(str(ROOT / "fixtures" / "python" / f"{code}_*.py")) if f.endswith("_ok.py") == ok]
    return sorted(files)


def positive_fixtures() -> list:
    return fixtures_of(False)


# Why an _ok fixture has no control: the pattern that makes it correct is one the replay does not
# model (checked against the fixture's first comment line, which states it).
def no_control_reason(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        first = f.readline().lstrip("# ").strip()
    return first


def cell(text: str, limit: int = 240) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _count(values) -> dict:
    out: dict = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardlint", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--table", help="write the Markdown table here")
    ap.add_argument("--update-readme", help="rewrite the table between the probe-table markers of this file")
    ap.add_argument("--timeout", default="120", help="shardlint probe --timeout (seconds per run)")
    args = ap.parse_args()
    if not os.path.exists(args.python) or not has_torch(args.python):
        print(f"SKIP: {args.python} has no torch; make the probe environment with scripts/setup-probe.sh")
        return 77
    fixtures = positive_fixtures()
    cmd = [args.shardlint, "probe", "--format", "json", "--python", args.python, "--timeout", args.timeout, *fixtures]
    started = time.monotonic()
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    seconds = time.monotonic() - started
    sys.stderr.write(run.stderr[-6000:] if run.returncode not in (0, 1) else "")
    try:
        findings = json.loads(run.stdout)["findings"]
    except (ValueError, KeyError) as exc:
        print(f"FAIL: shardlint probe printed no JSON findings (exit {run.returncode}): {exc}")
        print(run.stderr[-4000:])
        return 1
    backend = next((l for l in run.stderr.splitlines() if l.startswith("shardlint probe: backend")), "")
    selftest = next((l for l in run.stderr.splitlines() if "CPU self-test (" in l), "")  # not "is cached"
    failures, rows = [], []
    probed = [f for f in findings if f.get("code") in RULES]
    with_probe = [f for f in probed if "probe" in f]
    files_with_finding = {os.path.relpath(os.path.join(ROOT, f["path"]), ROOT) for f in probed}
    for fixture in fixtures:
        rel = os.path.relpath(fixture, ROOT)
        if rel not in files_with_finding:
            failures.append(f"{rel}: no finding of {', '.join(RULES)} (a positive fixture)")
    for f in with_probe:
        p = f["probe"]
        where = f"{f['path']}:{f['line']}"
        want = expected_verdict(p)
        got = p["verdict"]
        ok = got == want or (got == "probe-error" and any(r in p["evidence"] for r in NOT_REPLAYABLE_OK))
        if not ok:
            failures.append(f"{where} {f['code']}: {got}, expected {want}: {p['evidence']}")
        replay = p.get("replay") or {}
        api = replay.get("wrap_api", "")
        if replay.get("wrap_api") in ("fsdp1", "fabric"):
            api += f" (use_orig_params={replay.get('use_orig_params')})"
        if replay.get("wrap_api") == "accelerate":
            api += f" FSDP{replay.get('fsdp_version')}"
        versions = f"torch {p.get('torch_version')}" + (f", accelerate {p['accelerate_version']}" if p.get("accelerate_version") else "")
        rows.append((os.path.basename(f["path"]), f["code"], got, p["evidence"], p["elapsed_seconds"],
                     f"{replay.get('shape', '')}, {api}", versions, p.get("backend", ""), p.get("world_size", "")))
    for f in probed:
        if "probe" not in f:
            failures.append(f"{f['path']}:{f['line']} {f['code']}: no verdict attached")
    rows.sort(key=lambda r: (r[1], r[0]))

    # The _ok fixtures: every control must be not-reproduced.
    oks = fixtures_of(True)
    cmd = [args.shardlint, "probe", "--controls", "--format", "json", "--python", args.python, "--timeout",
           args.timeout, *oks]
    started_ok = time.monotonic()
    run_ok = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    seconds_ok = time.monotonic() - started_ok
    try:
        doc_ok = json.loads(run_ok.stdout)
    except ValueError as exc:
        print(f"FAIL: shardlint probe --controls printed no JSON (exit {run_ok.returncode}): {exc}")
        print(run_ok.stderr[-4000:])
        return 1
    for f in doc_ok.get("findings", []):
        failures.append(f"{f['path']}:{f['line']} {f['code']}: a finding in an _ok fixture")
    controls = doc_ok.get("controls", [])
    control_rows = []
    with_control = set()
    for c in controls:
        p = c.get("probe") or {}
        with_control.add(os.path.relpath(os.path.join(ROOT, c["path"]), ROOT))
        if p.get("verdict") != "not-reproduced":
            failures.append(f"control {c['path']}:{c['line']} {c['code']}: {p.get('verdict')}: {p.get('evidence')}")
        control_rows.append((os.path.basename(c["path"]), c["code"], p.get("verdict", "none"), c["message"],
                             p.get("evidence", ""), p.get("elapsed_seconds", 0.0)))
    if run_ok.returncode != 0 and not failures:
        failures.append(f"shardlint probe --controls exited {run_ok.returncode}")
    without = [f for f in oks if os.path.relpath(f, ROOT) not in with_control]
    control_rows.sort(key=lambda r: (r[1], r[0]))
    distinct = sum(1 for f in with_probe if not (f["probe"].get("replay") or {}).get("shared_with"))
    lines = [
        f"Generated by `tests/probe_real.py` (ctest `probe_real`) on {time.strftime('%Y-%m-%d')}: "
        f"{len(with_probe)} findings in {len(fixtures)} positive fixtures, {distinct} distinct replays, "
        f"{seconds:.0f} s in all on this machine ({os.cpu_count()} cores). {backend.replace('shardlint probe: ', '')}.",
        "",
        f"{selftest.replace('shardlint probe: ', '')}" if selftest else "",
        "",
        "| fixture | rule | verdict | evidence | s | replay | versions | backend, ranks |",
        "|---|---|---|---|---:|---|---|---|",
    ]
    for name, code, verdict, evidence, secs, replay, versions, be, ws in rows:
        lines.append(f"| `{name}` | {code} | **{verdict}** | {cell(evidence)} | {secs:.1f} | {cell(replay, 80)} | "
                     f"{versions} | {be}, {ws} |")
    lines += [
        "",
        f"**Controls** (`shardlint probe --controls` on the {len(oks)} `_ok` fixtures, {seconds_ok:.0f} s): "
        f"{len(controls)} controls in {len(with_control)} fixtures, "
        + ", ".join(f"{v} {k}" for k, v in sorted(_count(r[2] for r in control_rows).items()))
        + f"; {len(without)} fixtures have no control (their pattern is one the replay does not model).",
        "",
        "| fixture | rule | verdict | the pattern the rule found correct | s |",
        "|---|---|---|---|---:|",
    ]
    for name, code, verdict, message, evidence, secs in control_rows:
        lines.append(f"| `{name}` | {code} | **{verdict}** | {cell(message, 160)} | {secs:.1f} |")
    lines += ["", "| `_ok` fixture without a control | what makes it correct (its first line) |", "|---|---|"]
    for f in without:
        lines.append(f"| `{os.path.basename(f)}` | {cell(no_control_reason(f), 200)} |")
    table = "\n".join(lines) + "\n"
    if args.table:
        Path(args.table).write_text(table)
    if args.update_readme:
        readme = Path(args.update_readme)
        text = readme.read_text()
        if BEGIN not in text or END not in text:
            print(f"FAIL: {readme} has no {BEGIN} ... {END} markers")
            return 1
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        readme.write_text(head + BEGIN + "\n" + table + END + tail)
    verdicts = {}
    for r in rows:
        verdicts[r[2]] = verdicts.get(r[2], 0) + 1
    print(f"{len(with_probe)} findings probed in {seconds:.0f} s ({distinct} distinct replays): "
          + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())))
    print(f"{len(controls)} controls in {len(with_control)} of {len(oks)} _ok fixtures, {seconds_ok:.0f} s: "
          + ", ".join(f"{k} {v}" for k, v in sorted(_count(r[2] for r in control_rows).items())))
    for msg in failures:
        print("FAIL:", msg)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
