#!/usr/bin/env python3
"""Unit tests for ecosystem/check.py: triage parsing, matching, gone detection, the report and its exit
status, shardlint error exits and timeouts (with a fake shardlint written here), obtaining checkouts from a
local git directory. Needs neither the checkout cache nor the network; runs in about a second."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

sys.dont_write_bytecode = True  # ctest runs this from the source tree; leave no __pycache__ there
sys.path.insert(0, str(Path(__file__).resolve().parent))
import check  # noqa: E402

COMMIT_A = "a" * 40
COMMIT_B = "b" * 40

REPOS_TOML = f"""
[[repo]]
name = "alpha"
url = "https://example.invalid/alpha"
commit = "{COMMIT_A}"

[[repo]]
name = "beta"
url = "https://example.invalid/beta"
commit = "{COMMIT_B}"
"""

# A stand-in for shardlint (POSIX sh, so it starts fast). It checks that it was called as
# `check . --format json --no-cache`, then replays the checkout's FAKE.* files: FAKE.sleep (seconds to sleep first),
# FAKE.out (stdout), FAKE.err (stderr), FAKE.rc (exit code). `fake_spec` writes them.
FAKE_SHARDLINT = """#!/bin/sh
if [ "$*" != "check . --format json --no-cache" ]; then echo "fake shardlint: unexpected arguments: $*" >&2; exit 2; fi
if [ -f FAKE.sleep ]; then sleep "$(cat FAKE.sleep)"; fi
cat FAKE.out
cat FAKE.err >&2
exit "$(cat FAKE.rc)"
"""


def fake_spec(checkout, rc=None, findings=(), stderr="", sleep=None, raw=None):
    findings = list(findings)
    if raw is None:
        raw = json.dumps({"version": "0.1.0", "findings": findings,
                          "summary": {"files_checked": 3, "findings": len(findings)}})
    (checkout / "FAKE.out").write_text(raw)
    (checkout / "FAKE.err").write_text(stderr)
    (checkout / "FAKE.rc").write_text(str(rc if rc is not None else (1 if findings else 0)))
    if sleep is not None:
        (checkout / "FAKE.sleep").write_text(str(sleep))


def finding_json(path, line, code, message="something is off", name="some-rule"):
    return {"code": code, "name": name, "severity": "error", "path": path, "line": line, "column": 1,
            "end_line": line, "end_column": 2, "message": message, "notes": []}


def triage_text(*rows):
    return check.TRIAGE_HEADER + "\n" + "".join("\t".join(map(str, r)) + "\n" for r in rows)


class TempDirCase(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="eco-test-"))
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)


class LoadReposTest(TempDirCase):
    def write(self, text):
        path = self.tmp / "repos.toml"
        path.write_text(text)
        return path

    def test_loads_in_order(self):
        repos = check.load_repos(self.write(REPOS_TOML))
        self.assertEqual([r.name for r in repos], ["alpha", "beta"])
        self.assertEqual(repos[1].commit, COMMIT_B)

    def test_the_committed_file_is_valid(self):
        repos = check.load_repos(check.DEFAULT_REPOS)
        names = {r.name for r in repos}
        self.assertEqual(len(names), len(repos))  # unique
        self.assertTrue({"torchtitan", "torchtune", "examples", "accelerate", "trl", "pytorch-lightning",
                         "composer", "axolotl"} <= names)  # the set the issue starts with

    def test_rejects_bad_commit_and_duplicates(self):
        with self.assertRaisesRegex(check.EcosystemError, "40 lowercase hex"):
            check.load_repos(self.write('[[repo]]\nname = "x"\nurl = "u"\ncommit = "abc"\n'))
        with self.assertRaisesRegex(check.EcosystemError, "duplicate name"):
            check.load_repos(self.write(REPOS_TOML + REPOS_TOML))
        with self.assertRaisesRegex(check.EcosystemError, "missing keys"):
            check.load_repos(self.write('[[repo]]\nname = "x"\n'))


class ParseTriageTest(unittest.TestCase):
    def test_valid_file_with_comments_and_blank_lines(self):
        text = triage_text(
            ("alpha", "a/train.py", 3, "SL101", "true", "optimizer really is built first"),
            ("alpha", "conf/x.yaml", 12, "SL302", "false", "the consumer maps this key itself"),
        ) + "\n# a comment\n\nbeta\tz.py\t1\tSL103\t?\tTODO unsharded-params\n"
        triage = check.parse_triage(text)
        self.assertEqual(len(triage.entries), 3)
        entry = triage.entries[("alpha", "conf/x.yaml", 12, "SL302")]
        self.assertEqual((entry.verdict, entry.lineno), ("false", 3))
        self.assertIsNone(triage.first_unsorted)

    def test_crlf_line_endings(self):
        triage = check.parse_triage("alpha\ta.py\t1\tSL101\ttrue\tfine\r\n")
        self.assertEqual(triage.entries[("alpha", "a.py", 1, "SL101")].why, "fine")

    def assertMalformed(self, line, *patterns, lineno=2):
        with self.assertRaises(check.EcosystemError) as cm:
            check.parse_triage(check.TRIAGE_HEADER + "\n" + line + "\n", "eco/triage.tsv")
        message = str(cm.exception)
        self.assertIn(f"eco/triage.tsv:{lineno}:", message)
        for pattern in patterns:
            self.assertRegex(message, pattern)

    def test_malformed_lines_name_file_and_line(self):
        self.assertMalformed("alpha a.py 1 SL101 true why", "expected 6 tab-separated fields", "found 1")
        self.assertMalformed("alpha\ta.py\t1\tSL101\ttrue\twhy\textra", "found 7")
        self.assertMalformed("alpha\ta.py\tten\tSL101\ttrue\twhy", "positive integer")
        self.assertMalformed("alpha\ta.py\t0\tSL101\ttrue\twhy", "positive integer")
        self.assertMalformed("alpha\ta.py\t1\tE501\ttrue\twhy", "code must look like SL101")
        self.assertMalformed("alpha\ta.py\t1\tSL101\tyes\twhy", "verdict must be one of")
        self.assertMalformed("alpha\ta.py\t1\tSL101\ttrue\t  ", "needs one line of why")
        self.assertMalformed("alpha\ta.py\t1\tSL101\tfalse\tTODO some-rule", "TODO")
        self.assertMalformed("alpha\t./a.py\t1\tSL101\ttrue\twhy", "normalised")
        self.assertMalformed("alpha\t/abs/a.py\t1\tSL101\ttrue\twhy", "relative")
        self.assertMalformed("alpha\ta.py\t1\tSL101\ttrue\t" + "x" * 300, "one short line")

    def test_all_errors_are_reported_and_duplicates_point_at_the_first(self):
        text = "alpha\ta.py\t1\tSL101\ttrue\tok\nbad line\nalpha\ta.py\t1\tSL101\tfalse\tagain\n"
        with self.assertRaises(check.EcosystemError) as cm:
            check.parse_triage(text, "t.tsv")
        message = str(cm.exception)
        self.assertIn("t.tsv:2: expected 6", message)
        self.assertIn("t.tsv:3: duplicate of line 1", message)

    def test_unsorted_is_noticed(self):
        text = triage_text(("beta", "a.py", 1, "SL101", "true", "x"), ("alpha", "a.py", 1, "SL101", "true", "x"))
        self.assertEqual(check.parse_triage(text).first_unsorted, 3)
        # numeric line order, not text order
        text = triage_text(("alpha", "a.py", 9, "SL101", "true", "x"), ("alpha", "a.py", 10, "SL101", "true", "x"))
        self.assertIsNone(check.parse_triage(text).first_unsorted)

    def test_missing_file_is_an_empty_triage(self):
        self.assertEqual(check.load_triage(Path("/nonexistent/triage.tsv")).entries, {})

    def test_committed_triage_parses(self):
        if check.DEFAULT_TRIAGE.exists():
            check.load_triage(check.DEFAULT_TRIAGE)


class SortTriageTest(TempDirCase):
    def test_sorts_and_keeps_the_header(self):
        path = self.tmp / "t.tsv"
        path.write_text("# header\n# more\n\nbeta\ta.py\t1\tSL101\ttrue\tx\nalpha\ta.py\t10\tSL101\ttrue\ty\n"
                        "alpha\ta.py\t9\tSL101\ttrue\tz\n")
        self.assertEqual(check.sort_triage_file(path), 3)
        self.assertEqual(path.read_text(), "# header\n# more\nalpha\ta.py\t9\tSL101\ttrue\tz\n"
                         "alpha\ta.py\t10\tSL101\ttrue\ty\nbeta\ta.py\t1\tSL101\ttrue\tx\n")


def result(repo, *findings, status="ok"):
    return check.RunResult(repo, status, 1.5, [check.Finding(repo, p, l, c, "rule", "msg") for p, l, c in findings])


class CompareTest(unittest.TestCase):
    TRIAGE = check.parse_triage(triage_text(
        ("alpha", "a.py", 1, "SL101", "true", "real bug"),
        ("alpha", "b.yaml", 5, "SL302", "false", "consumer handles it"),
        ("alpha", "c.py", 7, "SL103", "?", "TODO"),
        ("alpha", "old.py", 2, "SL101", "true", "was real"),
        ("beta", "x.py", 3, "SL102", "true", "real"),
    ))

    def test_matching_by_repo_path_line_code(self):
        res = result("alpha", ("a.py", 1, "SL101"), ("b.yaml", 5, "SL302"), ("c.py", 7, "SL103"),
                     ("a.py", 2, "SL101"), ("a.py", 1, "SL102"))
        report = check.compare(res, self.TRIAGE)
        self.assertEqual([f.key for f in report.true], [("alpha", "a.py", 1, "SL101")])
        self.assertEqual([f.key for f, _ in report.false], [("alpha", "b.yaml", 5, "SL302")])
        self.assertEqual(report.false[0][1].why, "consumer handles it")
        # a `?` verdict is untriaged; another line or another code on the same line does not match
        self.assertEqual([f.key for f in report.untriaged],
                         [("alpha", "c.py", 7, "SL103"), ("alpha", "a.py", 2, "SL101"), ("alpha", "a.py", 1, "SL102")])
        self.assertEqual([e.key for e in report.gone], [("alpha", "old.py", 2, "SL101")])

    def test_other_repositories_entries_do_not_match(self):
        report = check.compare(result("beta", ("a.py", 1, "SL101")), self.TRIAGE)
        self.assertEqual(len(report.untriaged), 1)
        self.assertEqual([e.key for e in report.gone], [("beta", "x.py", 3, "SL102")])

    def test_no_gone_for_a_repository_that_did_not_run(self):
        for status in ("error", "timeout", "missing"):
            report = check.compare(check.RunResult("alpha", status, detail="boom"), self.TRIAGE)
            self.assertEqual(report.gone, [], status)

    def test_two_findings_with_one_key_share_the_verdict(self):
        res = result("alpha", ("a.py", 1, "SL101"), ("a.py", 1, "SL101"))
        self.assertEqual(len(check.compare(res, self.TRIAGE).true), 2)


class SummaryTest(unittest.TestCase):
    TRIAGE = CompareTest.TRIAGE

    def summary(self, *results, skip_missing=False):
        return check.Summary([check.compare(r, self.TRIAGE) for r in results], skip_missing)

    def test_all_true_and_gone_only_passes(self):
        s = self.summary(result("alpha", ("a.py", 1, "SL101")), result("beta", ("x.py", 3, "SL102")))
        self.assertEqual(s.exit_status(), 0)
        text = check.render_report(s, "tri.tsv")
        self.assertIn("GONE (3)", text)
        self.assertIn("tri.tsv:5  alpha  old.py:2  SL101  (true)", text)
        self.assertIn("OK: 2 findings in 2 repositories", text)

    def test_false_fails_with_its_reason(self):
        s = self.summary(result("alpha", ("a.py", 1, "SL101"), ("b.yaml", 5, "SL302")))
        self.assertEqual(s.exit_status(), 1)
        text = check.render_report(s, "tri.tsv")
        self.assertIn("FALSE findings (1)", text)
        self.assertIn("alpha  b.yaml:5  SL302  (tri.tsv:3: consumer handles it)", text)
        self.assertIn("FAIL: 1 false", text)

    def test_untriaged_fails(self):
        s = self.summary(result("beta", ("x.py", 3, "SL102"), ("new.py", 8, "SL101")))
        self.assertEqual(s.exit_status(), 1)
        text = check.render_report(s)
        self.assertIn("UNTRIAGED findings (1)", text)
        self.assertIn("beta  new.py:8  SL101  msg", text)
        self.assertIn("FAIL: 1 untriaged", text)

    def test_errors_timeouts_and_missing(self):
        s = self.summary(check.RunResult("alpha", "timeout", 3.0, detail="timed out after 3 s"),
                         result("beta", ("x.py", 3, "SL102")))
        self.assertEqual(s.exit_status(), 1)
        text = check.render_report(s)
        self.assertRegex(text, r"alpha\s+timeout\s+-")
        self.assertIn("alpha: timeout: timed out after 3 s", text)
        self.assertIn("FAIL: 1 repository timed out", text)
        missing = check.RunResult("alpha", "missing", detail="no checkout")
        self.assertEqual(self.summary(missing, result("beta", ("x.py", 3, "SL102"))).exit_status(), 1)
        s = self.summary(missing, result("beta", ("x.py", 3, "SL102")), skip_missing=True)
        self.assertEqual(s.exit_status(), 0)
        self.assertIn("ignored: --skip-missing", check.render_report(s))
        err = self.summary(check.RunResult("alpha", "error", 1.0, detail="shardlint exited 101"))
        self.assertEqual(err.exit_status(), 1)
        self.assertIn("1 repository failed", check.render_report(err))

    def test_unknown_repository_in_triage_fails(self):
        s = self.summary(result("beta", ("x.py", 3, "SL102")))
        s.unknown_repo_entries = [check.TriageEntry("gamma", "a.py", 1, "SL101", "true", "x", 9)]
        self.assertEqual(s.exit_status(), 1)
        self.assertIn("UNKNOWN REPOSITORIES (1)", check.render_report(s))

    def test_json_summary(self):
        s = self.summary(result("alpha", ("b.yaml", 5, "SL302"), ("n.py", 1, "SL101")))
        doc = check.summary_json(s)
        self.assertEqual(doc["exit_status"], 1)
        self.assertEqual(doc["repos"][0]["false"], 1)
        self.assertEqual(doc["untriaged"][0]["path"], "n.py")
        self.assertEqual(len(doc["gone"]), 3)  # a.py, c.py (a `?` line), old.py
        json.dumps(doc)


class WriteUntriagedTest(TempDirCase):
    def test_appends_sorted_unique_question_marks_that_parse(self):
        s = SummaryTest().summary(result("alpha", ("z.py", 1, "SL101"), ("n.py", 4, "SL103"), ("n.py", 4, "SL103")))
        path = self.tmp / "draft.tsv"
        self.assertEqual(check.write_untriaged(path, s), 2)
        self.assertEqual(check.write_untriaged(path, s), 0)  # already there
        text = path.read_text()
        self.assertTrue(text.startswith(check.TRIAGE_HEADER + "\n"))
        self.assertIn("alpha\tn.py\t4\tSL103\t?\tTODO rule\nalpha\tz.py\t1\tSL101\t?\tTODO rule\n", text)
        entries = check.parse_triage(text).entries
        self.assertEqual({e.verdict for e in entries.values()}, {"?"})


class RunShardlintTest(TempDirCase):
    def setUp(self):
        super().setUp()
        self.fake = self.tmp / "fake-shardlint"
        self.fake.write_text(FAKE_SHARDLINT)
        self.fake.chmod(0o755)
        self.checkout = self.tmp / "alpha"
        self.checkout.mkdir()

    def run_fake(self, timeout=30, **spec):
        fake_spec(self.checkout, **spec)
        return check.run_shardlint(self.fake, "alpha", self.checkout, timeout)

    def test_findings_are_parsed_and_paths_normalised(self):
        res = self.run_fake(rc=1, findings=[finding_json("./a/b.py", 3, "SL101"),
                                            finding_json(str(self.checkout / "c.yaml"), 4, "SL302")])
        self.assertEqual(res.status, "ok", res.detail)
        self.assertEqual([f.key for f in res.findings], [("alpha", "a/b.py", 3, "SL101"), ("alpha", "c.yaml", 4, "SL302")])
        self.assertEqual(res.files_checked, 3)
        self.assertGreater(res.seconds, 0)

    def test_no_findings(self):
        res = self.run_fake(rc=0)
        self.assertEqual((res.status, res.findings), ("ok", []))

    def test_error_exit_codes(self):
        res = self.run_fake(rc=101, stderr="internal error: boom")
        self.assertEqual(res.status, "error")
        self.assertIn("exited 101 (internal error", res.detail)
        self.assertIn("boom", res.detail)
        res = self.run_fake(rc=2, stderr="unknown option")
        self.assertIn("exited 2 (usage or I/O error)", res.detail)

    def test_bad_output_and_inconsistent_exit_code(self):
        res = self.run_fake(rc=1, raw="Segmentation fault?")
        self.assertEqual(res.status, "error")
        self.assertIn("not JSON", res.detail)
        res = self.run_fake(rc=0, findings=[finding_json("a.py", 1, "SL101")])
        self.assertEqual(res.status, "error")
        self.assertIn("exited 0 with 1 findings", res.detail)

    def test_timeout_kills_and_reports(self):
        start = time.monotonic()
        res = self.run_fake(timeout=0.2, sleep=30)
        self.assertLess(time.monotonic() - start, 10)
        self.assertEqual(res.status, "timeout")
        self.assertIn("timed out after 0.2 s", res.detail)

    def test_binary_that_cannot_run(self):
        res = check.run_shardlint(self.tmp / "nope", "alpha", self.checkout, 5)
        self.assertEqual(res.status, "error")
        self.assertIn("cannot run", res.detail)


class MainTest(TempDirCase):
    """The whole command with a fake shardlint, a temporary cache, repos file and triage."""

    def setUp(self):
        super().setUp()
        self.fake = self.tmp / "fake-shardlint"
        self.fake.write_text(FAKE_SHARDLINT)
        self.fake.chmod(0o755)
        self.repos = self.tmp / "repos.toml"
        self.repos.write_text(REPOS_TOML)
        self.cache = self.tmp / "cache"
        self.triage = self.tmp / "triage.tsv"

    def checkout(self, name, **spec):
        (self.cache / name).mkdir(parents=True, exist_ok=True)
        fake_spec(self.cache / name, **spec)

    def main(self, *extra):
        out, err = io.StringIO(), io.StringIO()
        argv = ["--cache", str(self.cache), "--shardlint", str(self.fake), "--repos-file", str(self.repos),
                "--triage", str(self.triage), *extra]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = check.main(argv)
        return rc, out.getvalue(), err.getvalue()

    def test_pass_fail_and_filters(self):
        self.checkout("alpha", rc=1, findings=[finding_json("a.py", 1, "SL101")])
        self.checkout("beta", rc=0)
        self.triage.write_text(triage_text(("alpha", "a.py", 1, "SL101", "true", "real")))
        rc, out, _ = self.main("--jobs", "2")
        self.assertEqual(rc, 0, out)
        self.assertIn("OK: 1 finding in 2 repositories", out)
        self.triage.write_text(triage_text(("alpha", "a.py", 1, "SL101", "false", "not real")))
        rc, out, _ = self.main()
        self.assertEqual(rc, 1)
        rc, out, _ = self.main("--repo", "beta")
        self.assertEqual(rc, 0, out)
        self.assertNotIn("alpha", out.split("\n", 1)[1])

    def test_timeout_fails_that_repository_only(self):
        self.checkout("alpha", sleep=30)
        self.checkout("beta", rc=1, findings=[finding_json("b.py", 2, "SL103")])
        rc, out, err = self.main("--timeout", "0.2", "--write-untriaged", str(self.tmp / "draft.tsv"),
                                 "--json", str(self.tmp / "s.json"))
        self.assertEqual(rc, 1)
        self.assertIn("alpha: timeout: timed out after 0.2 s", out)
        self.assertIn("beta  b.py:2  SL103", out)
        self.assertIn("beta\tb.py\t2\tSL103\t?\t", (self.tmp / "draft.tsv").read_text())
        doc = json.loads((self.tmp / "s.json").read_text())
        self.assertEqual([r["status"] for r in doc["repos"]], ["timeout", "ok"])

    def test_missing_checkout_explains_how_to_obtain_it(self):
        self.checkout("beta", rc=0)
        rc, out, _ = self.main()
        self.assertEqual(rc, 1)
        self.assertIn("alpha: missing", out)
        self.assertIn("--fetch --repo alpha", out)
        self.assertIn("--from-git-dir alpha=GITDIR", out)
        rc, out, _ = self.main("--skip-missing")
        self.assertEqual(rc, 0, out)

    def test_stale_checkout_is_an_error(self):
        self.checkout("alpha", rc=0)
        self.checkout("beta", rc=0)
        (self.cache / "alpha.commit").write_text("c" * 40 + "\n")
        (self.cache / "beta.commit").write_text(COMMIT_B + "\n")
        rc, out, _ = self.main()
        self.assertEqual(rc, 1)
        self.assertIn("repos.toml pins aaaaaaaaaaaa", out)
        self.assertNotIn("no commit record", out)  # beta's record matches

    def test_bad_input_is_exit_2(self):
        self.triage.write_text("alpha\ta.py\tx\tSL101\ttrue\twhy\n")
        rc, _, err = self.main()
        self.assertEqual(rc, 2)
        self.assertIn("triage.tsv:1: line must be a positive integer", err)
        rc, _, err = self.main("--repo", "gamma")
        self.assertEqual(rc, 2)
        self.assertIn("unknown repository gamma", err)
        self.triage.write_text("")
        rc, _, err = self.main("--shardlint", str(self.tmp / "missing-binary"))
        self.assertEqual(rc, 2)
        self.assertIn("shardlint binary not found", err)


def git(*args, cwd=None):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env=dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                            GIT_COMMITTER_EMAIL="t@t", GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1"))


@unittest.skipUnless(shutil.which("git"), "git is not installed")
class ObtainTest(TempDirCase):
    def make_repo(self):
        src = self.tmp / "src"
        (src / "pkg").mkdir(parents=True)
        (src / "pkg" / "train.py").write_text("print('hi')\n")
        (src / "run.sh").write_text("#!/bin/sh\n")
        (src / "run.sh").chmod(0o755)
        (src / "gone.txt").write_text("unique contents of a blob that will be deleted\n")
        os.symlink("pkg/train.py", src / "link.py")
        git("init", "-q", cwd=src)
        git("add", "-A", cwd=src)
        git("commit", "-q", "-m", "one", cwd=src)
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=src, capture_output=True, text=True).stdout.strip()
        return src, commit

    def test_extract_from_git_dir_skips_symlinks_and_missing_blobs(self):
        src, commit = self.make_repo()
        blob = subprocess.run(["git", "hash-object", "gone.txt"], cwd=src, capture_output=True, text=True).stdout.strip()
        (src / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
        repo = check.Repo("alpha", "https://example.invalid/alpha", commit)
        cache = self.tmp / "cache"
        text = check.extract_repo(repo, cache, src / ".git")
        self.assertIn("extracted 2 files", text)
        self.assertIn("1 symlinks", text)
        self.assertIn("1 blobs the git directory lacks (gone.txt)", text)
        self.assertEqual((cache / "alpha" / "pkg" / "train.py").read_text(), "print('hi')\n")
        self.assertTrue(os.access(cache / "alpha" / "run.sh", os.X_OK))
        self.assertFalse((cache / "alpha" / "link.py").exists())
        self.assertEqual((cache / "alpha.commit").read_text().strip(), commit)
        self.assertEqual(sorted(p.name for p in cache.iterdir()), ["alpha", "alpha.commit"])  # no temp left
        self.assertIn("already at", check.extract_repo(repo, cache, src / ".git"))

    def test_extract_unknown_commit_and_occupied_destination(self):
        src, _ = self.make_repo()
        cache = self.tmp / "cache"
        with self.assertRaisesRegex(check.EcosystemError, "does not have commit"):
            check.extract_repo(check.Repo("alpha", "u", "0" * 40), cache, src / ".git")
        (cache / "beta").mkdir(parents=True)
        with self.assertRaisesRegex(check.EcosystemError, "already exists"):
            check.extract_repo(check.Repo("beta", "u", "0" * 40), cache, src / ".git")

    def test_fetch_clones_and_checks_out_the_commit(self):
        src, commit = self.make_repo()
        (src / "later.py").write_text("x = 1\n")
        git("add", "-A", cwd=src)
        git("commit", "-q", "-m", "two", cwd=src)
        cache = self.tmp / "cache"
        text = check.fetch_repo(check.Repo("alpha", src.as_uri(), commit), cache)
        self.assertIn("cloned", text)
        self.assertTrue((cache / "alpha" / "pkg" / "train.py").is_file())
        self.assertFalse((cache / "alpha" / "later.py").exists())  # the pinned commit, not the tip
        self.assertEqual((cache / "alpha.commit").read_text().strip(), commit)


if __name__ == "__main__":
    unittest.main()
