#!/usr/bin/env python3
"""The runtime probe against a real PyTorch (issues 28 and 31): every positive fixture of the probed rules
given (default SL101, SL102, SL103, SL104, SL402; ctest `probe_real_hf` runs SL105, SL201 and SL202 with their
project fixtures) is replayed on gloo/CPU ranks and must give the verdict its replay predicts, with evidence
read off the run.

    tests/probe_real.py --shardlint build/shardlint --python build/probe-venv/bin/python \
        [--rules SL105,SL201,SL202 --projects NAME,... --marker probe-table-hf] \
        [--table FILE] [--update-readme runtime_probe/README.md]

Expected verdicts (anything else fails the test): `confirmed` for every finding.

Then every `_ok` fixture of those rules (and every `_ok` project named) is probed with `--controls`: the
rules' controls (the patterns they examined and found correct, where the replay can show why) must all be
`not-reproduced`, whichever rule recorded them; `_ok` fixtures without a control are listed in the table
with the reason.

Exit 77 (ctest: skipped) when the interpreter has no torch, or (SL105, SL202) no transformers or peft: the
probe environment is made by scripts/setup-probe.sh. The table (Markdown) is what runtime_probe/README.md
shows between the `<marker>` markers (default `probe-table`); --update-readme rewrites it there.
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
RULES = ("SL101", "SL102", "SL103", "SL104", "SL402")
# The ctest that writes each README table (its marker).
CTESTS = {"probe-table": "probe_real", "probe-table-hf": "probe_real_hf", "probe-table-loop": "probe_real_loop"}
# What the replays of a rule import beyond torch and accelerate (the probe environment has them).
NEEDS = {"SL105": ("peft",), "SL202": ("transformers",)}


def expected_verdict(probe: dict) -> str:
    # Every finding is expected to be confirmed: SL101 reports Lightning Fabric only with
    # use_orig_params=False (written in FSDPStrategy, or a Lightning before 2.1 that the project pins).
    return "confirmed"


def imports(python: str, modules) -> bool:
    try:
        return subprocess.run([python, "-c", "import " + ", ".join(modules)], capture_output=True,
                              timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def fixtures_of(rules, ok: bool) -> list:
    files = []
    for code in rules:
        files += [f for f in glob.glob(str(ROOT / "fixtures" / "python" / f"{code}_*.py")) if f.endswith("_ok.py") == ok]
    return sorted(files)


def fixture_of(path: str, projects) -> str:
    """The fixture a finding's path belongs to: its file, or the project folder it is in."""
    rel = os.path.relpath(os.path.join(ROOT, path), ROOT)
    for p in projects:
        if rel.startswith(p.rstrip("/") + "/"):
            return p
    return rel


# Why an _ok fixture has no control: the pattern that makes it correct is one the replay does not
# model (checked against the fixture's first comment line, which states it; a project's: its first file's).
def no_control_reason(path: str) -> str:
    full = os.path.join(ROOT, path)
    if os.path.isdir(full):
        found = sorted(glob.glob(os.path.join(full, "**", "*.py"), recursive=True))
        if not found:
            return ""
        full = found[0]
    with open(full, encoding="utf-8") as f:
        first = f.readline().lstrip("# ").strip()
    return first


def display(path: str, projects) -> str:
    """A fixture file's name, or a project's file as `project/relative/path`."""
    rel = os.path.relpath(os.path.join(ROOT, path), ROOT)
    for p in projects:
        if rel == p or rel.startswith(p.rstrip("/") + "/"):
            return os.path.relpath(rel, os.path.dirname(p))
    return os.path.basename(rel)


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
    ap.add_argument("--rules", default=",".join(RULES), help="the rules whose fixtures are probed (comma-separated)")
    ap.add_argument("--projects", default="", help="project fixtures (fixtures/projects/NAME, comma-separated) probed "
                                                    "too: a NAME ending in _ok with --controls")
    ap.add_argument("--marker", default="probe-table", help="the README markers the table goes between")
    args = ap.parse_args()
    rules = tuple(r for r in args.rules.split(",") if r)
    projects = [f"fixtures/projects/{p}" for p in args.projects.split(",") if p]
    begin, end = f"<!-- {args.marker}:begin -->", f"<!-- {args.marker}:end -->"
    if not os.path.exists(args.python) or not imports(args.python, ["torch"]):
        print(f"SKIP: {args.python} has no torch; make the probe environment with scripts/setup-probe.sh")
        return 77
    needed = sorted({m for r in rules for m in NEEDS.get(r, ())})
    if needed and not imports(args.python, needed):
        print(f"SKIP: {args.python} cannot import {', '.join(needed)}; make the probe environment with "
              "scripts/setup-probe.sh")
        return 77
    fixtures = fixtures_of(rules, False) + [p for p in projects if not p.endswith("_ok")]
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
    probed = [f for f in findings if f.get("code") in rules]
    with_probe = [f for f in probed if "probe" in f]
    files_with_finding = {fixture_of(f["path"], projects) for f in probed}
    for fixture in fixtures:
        rel = os.path.relpath(os.path.join(ROOT, fixture), ROOT)
        if rel not in files_with_finding:
            failures.append(f"{rel}: no finding of {', '.join(rules)} (a positive fixture)")
    for f in with_probe:
        p = f["probe"]
        where = f"{f['path']}:{f['line']}"
        want = expected_verdict(p)
        got = p["verdict"]
        if got != want:
            failures.append(f"{where} {f['code']}: {got}, expected {want}: {p['evidence']}")
        replay = p.get("replay") or {}
        api = replay.get("wrap_api", "")
        if replay.get("wrap_api") in ("fsdp1", "fabric"):
            api += f" (use_orig_params={replay.get('use_orig_params')})"
        if replay.get("wrap_api") == "accelerate":
            api += f" FSDP{replay.get('fsdp_version')}"
        if replay.get("wrap_api") == "trainer":
            api += {"args": " (FSDP from its TrainingArguments)", "off": " (FSDP off)"}.get(
                replay.get("fsdp_from"), f" (FSDP from the launcher, fsdp_version {replay.get('fsdp_version')})")
        if replay.get("joint"):
            api += ", joint setup"
        if replay.get("replacement"):
            api = f"{replay['replacement']}, {api}"
        versions = f"torch {p.get('torch_version')}" + (f", accelerate {p['accelerate_version']}" if p.get("accelerate_version") else "")
        rows.append((display(f["path"], projects), f["code"], got, p["evidence"], p["elapsed_seconds"],
                     f"{replay.get('shape', '')}, {api}", versions, p.get("backend", ""), p.get("world_size", "")))
    for f in probed:
        if "probe" not in f:
            failures.append(f"{f['path']}:{f['line']} {f['code']}: no verdict attached")
    rows.sort(key=lambda r: (r[1], r[0]))

    # The _ok fixtures: every control must be not-reproduced.
    oks = fixtures_of(rules, True) + [p for p in projects if p.endswith("_ok")]
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
        with_control.add(fixture_of(c["path"], projects))
        if p.get("verdict") != "not-reproduced":
            failures.append(f"control {c['path']}:{c['line']} {c['code']}: {p.get('verdict')}: {p.get('evidence')}")
        control_rows.append((display(c["path"], projects), c["code"], p.get("verdict", "none"), c["message"],
                             p.get("evidence", ""), p.get("elapsed_seconds", 0.0)))
    if run_ok.returncode != 0 and not failures:
        failures.append(f"shardlint probe --controls exited {run_ok.returncode}")
    without = [f for f in oks if os.path.relpath(os.path.join(ROOT, f), ROOT) not in with_control]
    control_rows.sort(key=lambda r: (r[1], r[0]))
    distinct = sum(1 for f in with_probe if not (f["probe"].get("replay") or {}).get("shared_with"))
    lines = [
        f"Generated by `tests/probe_real.py` (ctest `{CTESTS.get(args.marker, args.marker)}`) "
        f"on {time.strftime('%Y-%m-%d')}: "
        f"{len(with_probe)} findings of {', '.join(rules)} in {len(fixtures)} positive fixtures, {distinct} distinct replays, "
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
        + (f"; {len(without)} fixtures have no control (their pattern is one the replay does not model)."
           if without else "; every fixture has one."),
        "",
        "| fixture | rule | verdict | the pattern the rule found correct | s |",
        "|---|---|---|---|---:|",
    ]
    for name, code, verdict, message, evidence, secs in control_rows:
        lines.append(f"| `{name}` | {code} | **{verdict}** | {cell(message, 160)} | {secs:.1f} |")
    if without:
        lines += ["", "| `_ok` fixture without a control | what makes it correct (its first line) |", "|---|---|"]
    for f in without:
        lines.append(f"| `{display(f, projects)}` | {cell(no_control_reason(f), 200)} |")
    table = "\n".join(lines) + "\n"
    if args.table:
        Path(args.table).write_text(table)
    if args.update_readme:
        readme = Path(args.update_readme)
        text = readme.read_text()
        if begin not in text or end not in text:
            print(f"FAIL: {readme} has no {begin} ... {end} markers")
            return 1
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        readme.write_text(head + begin + "\n" + table + end + tail)
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
