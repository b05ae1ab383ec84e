#!/usr/bin/env python3
"""Script mode against a real PyTorch: the seeded examples, then bad input.

    tests/probe_examples.py --shardlint BIN --python PY [--jobs N] [--only NAME...]

1. Each of the five scripts with a seeded bug in examples/ (examples/README.md) runs unmodified
   under `shardlint probe --mode script --backend gloo --nproc 2` at toy size (its own command-line
   options), to its first optimizer step on two gloo ranks on CPU; every finding of the script must
   be `confirmed`.
2. Bad input, with the real torch (scripts in fixtures/probe/bad/, each with an SL101 finding so
   that it is probed):
   - needs_gpu.py (torch.cuda.set_device on a CPU run): `not-reached`, torch's CUDA error in the evidence;
   - rank_dies.py (rank 1 calls os._exit(3)): `not-reached`, naming rank 1 as the one without a report
     (or, when rank 0 was killed before writing one too, quoting torchrun's root cause: rank 1, exit 3);
   - hangs.py (rank 1 sleeps forever) with --timeout 20: `not-reached`, "timed out", the run killed
     within 30 s;
   - --python with an interpreter that has no torch: exit code 2 and the probe's message.
   After every case, no process of the run may be left (pgrep -f on the script, then the process's
   TMPDIR, so that other jobs running the same file do not count) and no `shardlint-*` entry may be
   left in the TMPDIR the run was given (a fresh mktemp -d).

Exit 77 (ctest: skipped) when PY has no torch: the probe environment is made by scripts/setup-probe.sh.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LM = ["--dim", "32", "--layers", "2", "--heads", "4", "--vocab", "128", "--seq-len", "16", "--batch-size", "2"]
EXAMPLES = {
    "fsdp1_optimizer_first.py": LM,
    "nanogpt_fsdp.py": LM,
    "fsdp2_blocks_only.py": LM,
    "clip_logit_scale.py": ["--dim", "32", "--layers", "2", "--embed-dim", "16", "--batch-size", "8"],
    "accelerate_fsdp2_stray_param.py": ["--dim", "32", "--samples", "64", "--batch-size", "8"],
}
HANG_TIMEOUT = 20   # --timeout of the hanging script
HANG_LIMIT = 30     # the killed run must be over within this many seconds
RUN_TIMEOUT = 180   # --timeout of every other run


def has_torch(python: str) -> bool:
    try:
        return subprocess.run([python, "-c", "import torch"], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def python_without_torch(scratch: Path) -> str:
    """An interpreter that cannot import torch: this one or /usr/bin/python3 when they lack it, else a
    fresh virtual environment without pip (it does not see the base interpreter's packages)."""
    for candidate in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(candidate) and not has_torch(candidate):
            return candidate
    venv = scratch / "no-torch-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    return str(venv / "bin" / "python")


def environ_of(pid: int) -> dict:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    out = {}
    for item in raw.split(b"\0"):
        key, _, value = item.partition(b"=")
        out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


def leftover_processes(marker: str, tmpdir: str) -> list:
    """The processes of this run still alive: `pgrep -f` on the script and on the run's TMPDIR, kept
    when the process belongs to this run (the TMPDIR is on its command line or in its environment,
    so other jobs running the same file do not count); and any other process whose environment has
    that TMPDIR (the self-test's ranks, a worker a script started)."""
    candidates = set()
    for pattern in (marker, tmpdir):
        candidates.update(int(p) for p in
                          subprocess.run(["pgrep", "-f", "--", pattern], capture_output=True, text=True).stdout.split())
    candidates.update(int(p) for p in os.listdir("/proc") if p.isdigit())
    mine = []
    for pid in sorted(candidates - {os.getpid()}):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # gone meanwhile
        if not cmdline.strip():
            continue  # a zombie, or a kernel thread
        if tmpdir in cmdline or environ_of(pid).get("TMPDIR") == tmpdir:
            mine.append(f"{pid} {cmdline.strip()[:160]}")
    return mine


class Case:
    def __init__(self, name: str, script: str, script_args=(), timeout: int = RUN_TIMEOUT, python: str = ""):
        self.name, self.script, self.script_args = name, script, list(script_args)
        self.timeout, self.python = timeout, python
        self.code = None
        self.out = self.err = ""
        self.seconds = 0.0
        self.findings: list = []
        self.problems: list = []
        self.notes: list = []
        self.torch_leftovers: list = []

    def run(self, shardlint: str, python: str) -> "Case":
        tmpdir = tempfile.mkdtemp(prefix="probe-examples-")
        cmd = [shardlint, "probe", "--mode", "script", "--backend", "gloo", "--nproc", "2",
               "--python", self.python or python, "--timeout", str(self.timeout), "--format", "json",
               self.script, "--", *self.script_args]
        env = dict(os.environ, TMPDIR=tmpdir)
        started = time.monotonic()
        try:
            # The outer limit only stops a probe that itself hangs: its own runs stop at --timeout.
            run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=self.timeout + 240)
            self.code, self.out, self.err = run.returncode, run.stdout, run.stderr
        except subprocess.TimeoutExpired as exc:
            self.problems.append(f"shardlint probe did not return within {self.timeout + 240} s")
            self.out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        self.seconds = time.monotonic() - started
        try:
            self.findings = json.loads(self.out)["findings"] if self.out.strip() else []
        except (ValueError, KeyError) as exc:
            self.problems.append(f"no JSON findings on stdout: {exc}")
        # Nothing of the run may be left: processes, then the probe's folders.
        left = leftover_processes(self.script, tmpdir)
        for _ in range(10):  # a killed process may take a moment to go
            if not left:
                break
            time.sleep(0.2)
            left = leftover_processes(self.script, tmpdir)
        if left:
            self.problems.append("processes of the run left behind: " + "; ".join(left))
        entries = sorted(os.listdir(tmpdir))
        ours = [e for e in entries if e.startswith("shardlint-")]
        if ours:
            self.problems.append(f"left in TMPDIR: {', '.join(ours)}")
        self.torch_leftovers = [e for e in entries if not e.startswith("shardlint-")]
        shutil.rmtree(tmpdir, ignore_errors=True)
        return self

    def probes(self) -> list:
        return [f for f in self.findings if "probe" in f]

    def describe(self) -> str:
        verdicts = ", ".join(f"{f['code']}:{f['line']} {f['probe']['verdict']} ({f['probe']['elapsed_seconds']:.1f} s run)"
                             for f in self.probes())
        return f"{self.name}: exit {self.code}, {self.seconds:.1f} s in all; {verdicts or 'no verdict'}"

    def failure(self, message: str) -> None:
        self.problems.append(message)


def check_example(case: Case) -> None:
    probes = case.probes()
    if case.code != 1:
        case.failure(f"exit code {case.code}, expected 1 (confirmed findings remain)")
    if not probes:
        case.failure("no probed finding")
    for f in probes:
        p = f["probe"]
        if p["verdict"] != "confirmed":
            case.failure(f"{f['code']} line {f['line']}: {p['verdict']}, expected confirmed: {p['evidence']}")
        elif case.name.startswith("accelerate_") and not (
                "couldn't be switched to its sharded version" in p["evidence"]
                and "the probe set distributed_type FSDP" in p["evidence"]):
            # On CPU accelerate would use DDP: the run must be accelerate's own FSDP2 prepare (switched
            # on by the instrumentation, and said so), failing with accelerate's own KeyError.
            case.failure(f"not confirmed by accelerate's FSDP2 KeyError after the announced switch: {p['evidence']}")


def only_verdict(case: Case) -> dict:
    probes = case.probes()
    if len(probes) != 1:
        case.failure(f"{len(probes)} probed findings, expected 1")
        return {"verdict": "", "evidence": "", "elapsed_seconds": 0.0}
    return probes[0]["probe"]


def check_needs_gpu(case: Case) -> None:
    p = only_verdict(case)
    if case.code != 1 or p["verdict"] != "not-reached":
        case.failure(f"exit {case.code}, {p['verdict']}, expected exit 1 and not-reached: {p['evidence']}")
    if not re.search(r"CUDA|NVIDIA|GPU", p["evidence"]):
        case.failure(f"torch's CUDA error is not in the evidence: {p['evidence']}")


def check_rank_dies(case: Case) -> None:
    p = only_verdict(case)
    if case.code != 1 or p["verdict"] != "not-reached":
        case.failure(f"exit {case.code}, {p['verdict']}, expected exit 1 and not-reached: {p['evidence']}")
    if "rank 1 wrote no report" in p["evidence"]:
        return
    # Seen once in about 50 runs: rank 0 left no report either (killed before it could write one), so
    # the probe reports that no rank wrote one and quotes torchrun, whose root cause names rank 1.
    if "no rank wrote a report" in p["evidence"] and re.search(
            r"rank\s*:\s*1 \(local_rank: 1\)\s*\|\s*exitcode\s*:\s*3", p["evidence"]):
        case.notes.append("rank 0 left no report either; the launcher's output names rank 1 (exit code 3)")
        return
    case.failure(f"the evidence does not name rank 1 as the rank that died: {p['evidence']}")


def check_hangs(case: Case) -> None:
    p = only_verdict(case)
    if case.code != 1 or p["verdict"] != "not-reached":
        case.failure(f"exit {case.code}, {p['verdict']}, expected exit 1 and not-reached: {p['evidence']}")
    if f"timed out after {HANG_TIMEOUT:.1f} s" not in p["evidence"]:
        case.failure(f"the evidence does not say it timed out: {p['evidence']}")
    if p["elapsed_seconds"] > HANG_LIMIT:
        case.failure(f"the hanging run took {p['elapsed_seconds']:.1f} s (--timeout {HANG_TIMEOUT}), over {HANG_LIMIT} s")


def check_no_torch(case: Case) -> None:
    if case.code != 2:
        case.failure(f"exit code {case.code}, expected 2")
    if "the probe needs PyTorch" not in case.err or "cannot import it" not in case.err:
        case.failure(f"no clear message on stderr: {case.err.strip()[-600:]}")
    if case.findings:
        case.failure("findings printed although the probe could not start")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardlint", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--jobs", type=int, default=2, help="probes run at the same time (default 2)")
    ap.add_argument("--only", nargs="*", help="run only these cases (names as printed)")
    args = ap.parse_args()
    if not os.path.exists(args.python) or not has_torch(args.python):
        print(f"SKIP: {args.python} has no torch; make the probe environment with scripts/setup-probe.sh")
        return 77
    shardlint = os.path.abspath(args.shardlint)
    scratch = Path(tempfile.mkdtemp(prefix="probe-examples-scratch-"))
    try:
        no_torch = python_without_torch(scratch)
        cases = [(Case(name, f"examples/{name}", toy), check_example) for name, toy in EXAMPLES.items()]
        cases += [
            # The hanging run first: it waits out its timeout while the others use the CPU.
            (Case("hangs.py", "fixtures/probe/bad/hangs.py", timeout=HANG_TIMEOUT), check_hangs),
            (Case("needs_gpu.py", "fixtures/probe/bad/needs_gpu.py"), check_needs_gpu),
            (Case("rank_dies.py", "fixtures/probe/bad/rank_dies.py"), check_rank_dies),
            (Case("no-torch", "fixtures/probe/bad/rank_dies.py", python=no_torch), check_no_torch),
        ]
        cases.sort(key=lambda c: c[0].name != "hangs.py")
        if args.only:
            cases = [c for c in cases if c[0].name in args.only]
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            done = list(pool.map(lambda c: (c[0].run(shardlint, args.python), c[1]), cases))
        total = time.monotonic() - started
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    failed = 0
    torch_files = set()
    for case, check in done:
        check(case)
        print(("FAIL " if case.problems else "ok   ") + case.describe())
        for note in case.notes:
            print("     note:", note)
        torch_files.update(re.sub(r"_\w{8}$", "_*", e) for e in case.torch_leftovers)
        for msg in case.problems:
            failed += 1
            print("     FAIL:", msg)
        if case.problems:
            print("     stderr tail:\n       " + "\n       ".join(case.err.strip().splitlines()[-15:]))
    if torch_files:  # torchrun's log folder (tempfile.mkdtemp), inductor's cache: not the probe's
        print(f"(left in the runs' TMPDIR by torch itself, not by the probe: {', '.join(sorted(torch_files))})")
    print(f"{len(done)} cases in {total:.0f} s (--jobs {args.jobs}, {os.cpu_count()} cores)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
