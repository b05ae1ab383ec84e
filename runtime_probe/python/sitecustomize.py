"""shardlint probe start-up hook.

`shardlint probe --mode script` puts this directory first on PYTHONPATH, so every Python process
of the run imports this module at start-up (the interpreter's `sitecustomize` mechanism): the
user's script runs unmodified. The instrumentation (shardlint_probe.instrument) is switched on
only when SHARDLINT_PROBE_MODE=script and the process is a torch.distributed.run worker; in any
other process, and in replay mode, this module does nothing but hand over to the sitecustomize
it shadows (the next one on sys.path, e.g. a distribution's or a virtual environment's).
"""

import os as _os
import sys as _sys


def _shardlint_probe_activate():
    if _os.environ.get("SHARDLINT_PROBE_MODE") != "script":
        return
    try:
        from shardlint_probe import instrument

        instrument.activate_script_mode()
    except Exception as exc:  # never stop the user's script from starting
        print(f"shardlint probe: the instrumentation could not start: {type(exc).__name__}: {exc}",
              file=_sys.stderr)


def _shardlint_probe_chain():
    """Runs the sitecustomize this one shadows, if any."""
    try:
        import importlib.machinery
        import importlib.util

        here = _os.path.dirname(_os.path.realpath(__file__))
        rest = [p for p in _sys.path if _os.path.realpath(p or _os.curdir) != here]
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if spec is None or spec.loader is None or not spec.origin:
            return
        if _os.path.realpath(spec.origin) == _os.path.realpath(__file__):
            return
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as exc:
        print(f"shardlint probe: the shadowed sitecustomize failed: {type(exc).__name__}: {exc}", file=_sys.stderr)


_shardlint_probe_activate()
_shardlint_probe_chain()
