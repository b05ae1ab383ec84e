#!/usr/bin/env python3
"""Runs the `run:` steps of the composite action (action.yml) the way a GitHub runner does, where no
runner is: each step's `env:` with its `${{ ... }}` expressions resolved (inputs with their defaults
unless given, `github.action_path`, `github.action_repository`, earlier steps' outputs), then its
script under `bash --noprofile --norc -eo pipefail`, with GITHUB_OUTPUT, GITHUB_PATH and RUNNER_TEMP as
a runner sets them. `uses:` steps (actions/cache) are skipped and listed. Any other expression is an
error, so the action cannot grow one this runner would get wrong. Stops at the first failing step, as
a runner does.

Two halves, because the clean Debian root has no YAML parser:
    action_steps.py plan action.yml > plan.json          (with PyYAML: the action as JSON)
    action_steps.py run plan.json --action-path DIR [--input NAME=VALUE ...]   (standard library only)
`run` prints each step's output and ends with one line `RESULT {json}`: every step's id, exit code and
outputs, and the action's outputs.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

EXPR = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")


def plan(path):
    import yaml  # only on the host
    with open(path) as f:
        action = yaml.safe_load(f)
    print(json.dumps(action, indent=1))
    return 0


def resolve(text, ctx):
    def one(m):
        expr = m.group(1)
        parts = expr.split(".")
        if parts[0] == "inputs" and len(parts) == 2 and parts[1] in ctx["inputs"]:
            return ctx["inputs"][parts[1]]
        if parts[0] == "github" and len(parts) == 2 and parts[1] in ctx["github"]:
            return ctx["github"][parts[1]]
        if parts[0] == "steps" and len(parts) == 4 and parts[2] == "outputs":
            return ctx["steps"].get(parts[1], {}).get(parts[3], "")
        raise SystemExit(f"action_steps.py: unsupported expression ${{{{ {expr} }}}}")
    return EXPR.sub(one, str(text))


def read_outputs(path):
    out = {}
    with open(path) as f:
        for line in f.read().splitlines():
            if "=" in line:
                k, v = line.split("=", 1)
                out[k] = v
    return out


def run(plan_path, action_path, given):
    with open(plan_path) as f:
        action = json.load(f)
    inputs = {k: str((v or {}).get("default", "")) for k, v in (action.get("inputs") or {}).items()}
    for k, v in given.items():
        if k not in inputs:
            raise SystemExit(f"action_steps.py: the action has no input {k!r}")
        inputs[k] = v
    ctx = {"inputs": inputs, "steps": {},
           "github": {"action_path": action_path, "action_repository": "shardlint/shardlint"}}
    temp = tempfile.mkdtemp(prefix="runner-")
    path_file = os.path.join(temp, "github_path")
    open(path_file, "w").close()
    results, skipped = [], []
    for i, step in enumerate(action["runs"]["steps"]):
        sid = step.get("id", f"step{i}")
        if "uses" in step:
            skipped.append(step["uses"])
            continue
        env = dict(os.environ)
        with open(path_file) as f:
            extra = [p for p in f.read().splitlines() if p]
        env["PATH"] = os.pathsep.join(list(reversed(extra)) + [env.get("PATH", "")])
        out_file = os.path.join(temp, f"output{i}")
        open(out_file, "w").close()
        env.update({"GITHUB_OUTPUT": out_file, "GITHUB_PATH": path_file, "RUNNER_TEMP": temp,
                    "GITHUB_WORKSPACE": os.getcwd(), "GITHUB_ACTION_PATH": action_path, "CI": "true"})
        for k, v in (step.get("env") or {}).items():
            env[k] = resolve(v, ctx)
        script = os.path.join(temp, f"step{i}.sh")
        with open(script, "w") as f:
            f.write(resolve(step["run"], ctx))
        shell = step.get("shell", "bash")
        if shell != "bash":
            raise SystemExit(f"action_steps.py: step {sid}: shell {shell!r} (only bash is run here)")
        print(f"::group::step {sid}", flush=True)
        rc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", script], env=env).returncode
        print("::endgroup::", flush=True)
        outputs = read_outputs(out_file)
        ctx["steps"][sid] = outputs
        results.append({"id": sid, "rc": rc, "outputs": outputs})
        if rc != 0:
            break
    action_outputs = {k: resolve(v.get("value", ""), ctx) for k, v in (action.get("outputs") or {}).items()}
    print("RESULT " + json.dumps({"steps": results, "skipped": skipped, "outputs": action_outputs}))
    return 0


def main(argv):
    if len(argv) >= 2 and argv[0] == "plan":
        return plan(argv[1])
    if len(argv) >= 2 and argv[0] == "run":
        action_path, given, rest = "", {}, argv[2:]
        while rest:
            if rest[0] == "--action-path" and len(rest) > 1:
                action_path, rest = rest[1], rest[2:]
            elif rest[0] == "--input" and len(rest) > 1 and "=" in rest[1]:
                k, v = rest[1].split("=", 1)
                given[k], rest = v, rest[2:]
            else:
                raise SystemExit(f"action_steps.py: unexpected {rest[0]!r}")
        return run(argv[1], action_path, given)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
