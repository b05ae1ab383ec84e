#!/usr/bin/env python3
"""shardlint ecosystem check.

Lints checkouts of public repositories (ecosystem/repos.toml, each at a pinned commit) from a cache
folder and compares every finding with the committed triage (ecosystem/triage.tsv). The check fails on
a finding triaged `false`, on a finding nobody has triaged, and when a repository cannot be linted
(shardlint error, timeout, checkout missing from the cache). Triage lines no longer produced are listed
as "gone" so the triage can be pruned; they do not fail the check.

    python3 ecosystem/check.py --cache DIR                      # lint and compare
    python3 ecosystem/check.py --cache DIR --fetch              # obtain checkouts (network: git clone)
    python3 ecosystem/check.py --cache DIR --from-git-dir NAME=GITDIR   # from a local git directory

See ecosystem/README.md. Standard library only (Python >= 3.11 for tomllib).

The code lives in the package beside this file (ecosystem/ecocheck/), one module an idea: common (paths,
exit statuses, errors), repos (repos.toml), triage (triage.tsv), lint (running shardlint on a checkout),
report (comparison and report), checkouts (--fetch, --from-git-dir) and cli (the command line). This file
keeps the command line and the names other scripts and the tests use (`import check`).
"""

from __future__ import annotations

import sys

from ecocheck.common import *  # noqa: F401,F403
from ecocheck.repos import *  # noqa: F401,F403
from ecocheck.triage import *  # noqa: F401,F403
from ecocheck.lint import *  # noqa: F401,F403
from ecocheck.report import *  # noqa: F401,F403
from ecocheck.checkouts import *  # noqa: F401,F403
from ecocheck.cli import *  # noqa: F401,F403

if __name__ == "__main__":
    sys.exit(main())
