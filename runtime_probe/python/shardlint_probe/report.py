"""The JSON report each rank writes: $SHARDLINT_PROBE_OUT/rank<R>.json.

Standard library only. The keys of the first block match the C++ ``RankReport``
(runtime_probe/include/probe/Types.h) in snake_case; the rest are extras a reader may
ignore. See runtime_probe/python/README.md for the schema.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Any, Dict, List, Optional

SCHEMA_VERSION = 1

# Exit codes of a replay program (and of script mode when the probe stops the script).
EXIT_OK = 0            # the report was written; what happened is in it (a captured framework
                       # exception is a result, not a failure)
EXIT_PROBE_ERROR = 3   # the report was written, but the probe could not do its job: see probe_error
EXIT_NO_REPORT = 4     # the report could not be written

# Event kinds recorded by the instrumentation (runtime_probe/python/shardlint_probe/instrument.py).
EVENT_KINDS = (
    "optimizer_init",      # torch.optim.Optimizer.__init__ (any subclass)
    "add_param_group",     # Optimizer.add_param_group called by user code (not by __init__)
    "fully_shard",         # FSDP2 fully_shard
    "fsdp1_init",          # FullyShardedDataParallel(...) (the outermost one of a nested construction)
    "accelerate_prepare",  # accelerate.Accelerator.prepare
    "replace_params",      # a replay replaces the model's parameters (get_peft_model, to_empty, ...; SL105)
    "optimizer_step",      # the first optimizer.step()
)

# Phases of a run, in order; an exception is reported with the phase it was raised in.
PHASES = ("setup", "optimizer", "replace", "wrap", "prepare", "trainer", "train", "add_param_group", "forward", "backward",
          "step", "checks")

MAX_EVENTS = 256
MAX_MESSAGE = 4000
MAX_NAMES = 32

DEFAULT_OUT = "shardlint-probe-out"


def env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, ""))
    except ValueError:
        return default


def output_dir() -> str:
    """$SHARDLINT_PROBE_OUT, or ./shardlint-probe-out."""
    return os.environ.get("SHARDLINT_PROBE_OUT") or DEFAULT_OUT


def report_path(rank: int, out_dir: Optional[str] = None) -> str:
    return os.path.join(out_dir or output_dir(), f"rank{rank}.json")


def exception_type_name(exc: BaseException) -> str:
    """'KeyError' for builtins, 'module.Qualname' for everything else."""
    cls = type(exc)
    module = getattr(cls, "__module__", "") or ""
    name = getattr(cls, "__qualname__", cls.__name__)
    return name if module in ("builtins", "") else f"{module}.{name}"


def exception_text(exc: BaseException) -> str:
    """str(exc) (KeyError's repr quotes stripped), truncated to MAX_MESSAGE characters."""
    if isinstance(exc, KeyError) and len(exc.args) == 1 and isinstance(exc.args[0], str):
        text = exc.args[0]
    else:
        try:
            text = str(exc)
        except Exception:
            text = repr(exc)
    if len(text) > MAX_MESSAGE:
        text = text[: MAX_MESSAGE - 3] + "..."
    return text


class RankReport:
    """One rank's report. Fields are attributes; ``to_dict`` gives the JSON object."""

    def __init__(self, mode: str = "replay") -> None:
        self.started = time.monotonic()
        # --- the C++ RankReport fields ---
        self.rank = env_int("RANK", 0)
        self.world_size = env_int("WORLD_SIZE", 1)
        self.backend = ""
        self.torch_version = ""
        self.accelerate_version = ""
        self.reached_step = False
        self.stale_optimizer_entries = 0
        self.unmanaged_entries = 0
        self.params_changed: Optional[bool] = None
        self.diverged: Optional[bool] = None
        # The model's trainable parameters (requires_grad) at the first step, and how many of them the
        # optimizer does not hold (SL105: parameters replaced after the optimizer was built). None: not measured.
        self.trainable_params: Optional[int] = None
        self.trainable_not_optimized: Optional[int] = None
        # SL207: after the step, the weights of two tied modules are no longer one value (the largest
        # difference of their full tensors). None: not measured.
        self.tied_apart: Optional[bool] = None
        self.tied_max_diff: Optional[float] = None
        self.exception_type = ""
        self.exception_message = ""
        self.elapsed_seconds = 0.0
        # --- extras ---
        self.events: List[Dict[str, Any]] = []
        self.finding: Dict[str, Any] = {"code": "", "path": "", "line": 0}
        self.mode = mode
        self.phase = "setup"            # the phase the exception was raised in (or the last one reached)
        self.optimizer_class = ""       # the optimizer class actually used / seen at the first step
        self.optimizer_entries = 0      # tensors in the optimizer's param groups
        self.unmanaged_names: List[str] = []
        self.trainable_not_optimized_names: List[str] = []
        self.probe_error = ""
        self.notes: List[str] = []

    # ---- building ----

    def set_finding(self, code: str, path: str, line: int) -> None:
        self.finding = {"code": str(code), "path": str(path), "line": int(line)}

    def add_event(self, kind: str, file: str, line: int) -> None:
        if len(self.events) < MAX_EVENTS:
            self.events.append({"kind": str(kind), "file": str(file), "line": int(line)})

    def add_note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(str(text))

    def set_exception(self, exc: BaseException, phase: Optional[str] = None) -> None:
        """Records the first framework exception (later ones are ignored)."""
        if self.exception_type:
            return
        self.exception_type = exception_type_name(exc)
        self.exception_message = exception_text(exc)
        if phase:
            self.phase = phase

    def set_probe_error(self, text: str) -> None:
        if not self.probe_error:
            self.probe_error = text[:MAX_MESSAGE]

    def fill_environment(self) -> None:
        """Versions, backend and world size from what is loaded now (never imports torch)."""
        from . import compat

        self.torch_version = self.torch_version or compat.torch_version()
        self.accelerate_version = self.accelerate_version or compat.accelerate_version()
        dist = _initialized_dist()
        if dist is not None:
            try:
                self.rank = dist.get_rank()
                self.world_size = dist.get_world_size()
                self.backend = self.backend or str(dist.get_backend())
            except Exception:
                pass

    def to_dict(self) -> Dict[str, Any]:
        return {
            "schema": SCHEMA_VERSION,
            "rank": int(self.rank),
            "world_size": int(self.world_size),
            "backend": str(self.backend),
            "torch_version": str(self.torch_version),
            "accelerate_version": str(self.accelerate_version),
            "reached_step": bool(self.reached_step),
            "stale_optimizer_entries": int(self.stale_optimizer_entries),
            "unmanaged_entries": int(self.unmanaged_entries),
            "params_changed": None if self.params_changed is None else bool(self.params_changed),
            "diverged": None if self.diverged is None else bool(self.diverged),
            "trainable_params": None if self.trainable_params is None else int(self.trainable_params),
            "trainable_not_optimized": None if self.trainable_not_optimized is None else int(self.trainable_not_optimized),
            "exception_type": str(self.exception_type),
            "tied_apart": None if self.tied_apart is None else bool(self.tied_apart),
            "tied_max_diff": None if self.tied_max_diff is None else float(self.tied_max_diff),
            "exception_message": str(self.exception_message),
            "elapsed_seconds": round(float(self.elapsed_seconds), 3),
            "events": list(self.events),
            "finding": dict(self.finding),
            "mode": str(self.mode),
            "phase": str(self.phase),
            "optimizer_class": str(self.optimizer_class),
            "optimizer_entries": int(self.optimizer_entries),
            "unmanaged_names": list(self.unmanaged_names[:MAX_NAMES]),
            "trainable_not_optimized_names": list(self.trainable_not_optimized_names[:MAX_NAMES]),
            "probe_error": str(self.probe_error),
            "notes": list(self.notes),
        }

    def write(self, out_dir: Optional[str] = None) -> str:
        """Fills in the environment, then writes rank<R>.json atomically (a temp file, then a
        rename); returns its path."""
        self.fill_environment()
        self.elapsed_seconds = time.monotonic() - self.started
        return write_report(self.to_dict(), out_dir)


def _initialized_dist():
    import sys

    if "torch" not in sys.modules:
        return None
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist
    except Exception:
        pass
    return None


def write_report(data: Dict[str, Any], out_dir: Optional[str] = None) -> str:
    directory = out_dir or output_dir()
    os.makedirs(directory, exist_ok=True)
    path = report_path(int(data.get("rank", 0)), directory)
    fd, tmp = tempfile.mkstemp(prefix=".rank", suffix=".json.tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, ensure_ascii=False, allow_nan=False)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def read_report(path: str) -> Dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)
