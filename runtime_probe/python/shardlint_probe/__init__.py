"""shardlint's runtime probe, the Python side.

- ``report``: the JSON report each rank writes ($SHARDLINT_PROBE_OUT/rank<R>.json);
- ``checks``: what is checked at the first optimizer step (stale and unmanaged optimizer
  entries, whether the step changed the parameters, divergence across ranks);
- ``instrument``: the instrumentation of script mode (activated by ../sitecustomize.py);
- ``replay_runtime``: helpers the generated replay programs import;
- ``compat``: lazy torch/accelerate imports and version checks.

Standard library only at import time; torch and accelerate are imported when needed.
"""

__all__ = ["checks", "compat", "instrument", "replay_runtime", "report"]
__version__ = "0.1.0"
