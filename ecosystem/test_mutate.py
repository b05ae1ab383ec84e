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

    def test_bad_data_file(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "m.json"
            p.write_text(json.dumps({"mutations": [{"repo": "r"}]}))
            with self.assertRaises(check.EcosystemError):
                mutate.load_mutations(p)


if __name__ == "__main__":
    unittest.main()
