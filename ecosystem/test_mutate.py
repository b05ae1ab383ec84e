#!/usr/bin/env python3
"""Unit tests of ecosystem/mutate.py's own logic (the text mutation and the data file); no checkouts."""

import json
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check  # noqa: E402
import mutate  # noqa: E402


def entry(**kw):
    base = dict(repo="r", path="p.py", commit="0" * 40, wrap_api="x", optimizer="opt =", wrap="model = FSDP(",
                expected="SL101", note="")
    base.update(kw)
    return mutate.Entry(**base)


SRC = """def main():
    model = Net()
    if fsdp:
        model = FSDP(
            model,
        )
    opt = AdamW(
        model.parameters(),
    )
    opt.step()
"""


class MutateTest(unittest.TestCase):
    def test_moves_continuation_lines_and_reindents(self):
        out, move = mutate.mutate(SRC, entry())
        self.assertEqual(move, "lines 7-9 moved above line 4")
        self.assertIn("    if fsdp:\n        opt = AdamW(\n            model.parameters(),\n        )\n        model = FSDP(", out)
        self.assertNotIn("\n    opt = AdamW", out)

    def test_compound_wrap_and_several_statements(self):
        src = "x = 1\nfor b in m.layers:\n    fully_shard(b)\nfully_shard(m)\nps = list(m.parameters())\nopt = A(ps)\n"
        out, _ = mutate.mutate(src, entry(optimizer="ps =", statements=2, wrap="for b in m.layers:"))
        self.assertEqual(out, "x = 1\nps = list(m.parameters())\nopt = A(ps)\nfor b in m.layers:\n    fully_shard(b)\nfully_shard(m)\n")

    def test_rewrite(self):
        src = "sm = fully_shard(m)\nopt = A(sm.parameters())\n"
        out, _ = mutate.mutate(src, entry(wrap="sm = fully_shard", rewrite=["sm.parameters()", "m.parameters()"]))
        self.assertEqual(out, "opt = A(m.parameters())\nsm = fully_shard(m)\n")

    def test_drop_removes_one_whole_line(self):
        src = "m = FSDP(m)\nopt = None\nif train:\n    opt = A(m.parameters())\n    opt.step()\n"
        out, _ = mutate.mutate(src, entry(wrap="m = FSDP", optimizer="    opt = A", drop="opt = None"))
        self.assertEqual(out, "opt = A(m.parameters())\nm = FSDP(m)\nif train:\n    opt.step()\n")
        with self.assertRaises(mutate.MutationError):  # not a whole line of the mutant
            mutate.mutate(src, entry(wrap="m = FSDP", optimizer="    opt = A", drop="opt ="))

    def test_ambiguous_snippet_needs_a_line(self):
        src = "w = FSDP(m)\nopt = A(w.parameters())\nopt = A(w.parameters())\n"
        with self.assertRaises(mutate.MutationError):
            mutate.mutate(src, entry(wrap="w = FSDP"))
        out, _ = mutate.mutate(src, entry(wrap="w = FSDP", optimizer_line=3))
        self.assertTrue(out.startswith("opt = A"))

    def test_optimizer_already_first(self):
        with self.assertRaises(mutate.MutationError):
            mutate.mutate("opt = A(m.parameters())\nm = FSDP(m)\n", entry(wrap="m = FSDP"))

    def test_data_file_loads_and_matches_repos(self):
        entries = mutate.load_mutations(mutate.DEFAULT_MUTATIONS)
        repos = {r.name: r.commit for r in check.load_repos(check.DEFAULT_REPOS)}
        self.assertGreaterEqual(len(entries), 10)
        self.assertGreaterEqual(len({e.repo for e in entries}), 10)
        for e in entries:
            self.assertEqual(repos.get(e.repo), e.commit, e.repo)

    def test_setting_in_another_file(self):
        # The setting edits a config module in the copy: never the cached checkout (hard links), and the
        # original is linted under it too. A fake shardlint reports SL101 when the config holds the
        # setting and the optimizer comes before the wrap.
        import stat
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            cache = Path(d) / "cache"
            (cache / "r" / "cfg").mkdir(parents=True)
            (cache / "r" / "cfg" / "training.py").write_text("compile: bool = True\n")
            (cache / "r" / "p.py").write_text("model = FSDP(m)\nopt = AdamW(model.parameters())\n")
            fake = Path(d) / "shardlint"
            fake.write_text(
                "#!/usr/bin/env python3\n"
                "import json, pathlib\n"
                "bad = 'False' in pathlib.Path('cfg/training.py').read_text()\n"
                "first = pathlib.Path('p.py').read_text().startswith('opt')\n"
                "out = [{'code': 'SL101', 'line': 1}] if bad and first else []\n"
                "print(json.dumps({'findings': out}))\n")
            fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
            e = entry(optimizer="opt =", wrap="model = FSDP", setting=["compile: bool = True", "compile: bool = False"],
                      setting_path="cfg/training.py")
            r = mutate.run_entry(e, cache, fake, 30, None)
            self.assertEqual(r.verdict, "caught", r.detail)
            self.assertIn("True", (cache / "r" / "cfg" / "training.py").read_text())
            self.assertTrue((cache / "r" / "p.py").read_text().startswith("model"))
            bad = entry(setting=["absent", "x"], setting_path="cfg/training.py", wrap="model = FSDP")
            self.assertEqual(mutate.run_entry(bad, cache, fake, 30, None).verdict, "error")

    def test_bad_data_file(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "m.json"
            p.write_text(json.dumps({"mutations": [{"repo": "r"}]}))
            with self.assertRaises(check.EcosystemError):
                mutate.load_mutations(p)


if __name__ == "__main__":
    unittest.main()
