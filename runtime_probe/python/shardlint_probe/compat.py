"""Lazy access to torch, accelerate, transformers and peft, and the version checks the probe needs.

Nothing here imports torch or accelerate at module import time: the package must load (and
write a report saying what is missing) on a machine without them.
"""

from __future__ import annotations

import importlib
import re
import sys
from typing import Any, Optional, Tuple

# Minimum versions, by feature.
TORCH_MIN = "2.1"                # global optimizer step hooks, torch.distributed.fsdp._flat_param
TORCH_MIN_FSDP2 = "2.4"          # fully_shard (torch.distributed._composable.fsdp; public in 2.6)
TORCH_MIN_IGNORED_PARAMS = "2.7" # fully_shard(..., ignored_params=...)
ACCELERATE_MIN = "0.25"          # FSDP1 prepare without re-creating the optimizer
ACCELERATE_MIN_FSDP2 = "1.6"     # FullyShardedDataParallelPlugin(fsdp_version=2)
TRANSFORMERS_MIN = "4.30"        # Trainer with TrainingArguments(fsdp=...) through accelerate
PEFT_MIN = "0.3"                 # PeftModel.from_pretrained(..., is_trainable=True); LoRA on any nn.Linear


class ProbeEnvironmentError(RuntimeError):
    """The probe cannot run here: torch or accelerate missing or too old, no process group.

    Never a finding's evidence: the report carries it as ``probe_error``.
    """


def parse_version(text: str) -> Tuple[int, ...]:
    """'2.7.0a0+git1234' -> (2, 7, 0); '1.6.0.dev0' -> (1, 6, 0); '' -> ()."""
    parts = []
    for piece in str(text).split("+", 1)[0].split("."):
        m = re.match(r"\d+", piece)
        if not m:
            break
        parts.append(int(m.group(0)))
        if m.end() != len(piece):  # '0a0', '0rc1': a pre-release of this number; stop here
            break
    return tuple(parts)


def version_at_least(version: str, minimum: str) -> bool:
    have, need = parse_version(version), parse_version(minimum)
    if not have:
        return False
    width = max(len(have), len(need))
    return have + (0,) * (width - len(have)) >= need + (0,) * (width - len(need))


def installed_version(distribution: str) -> str:
    """The installed version of a distribution without importing it ('' when absent)."""
    module = sys.modules.get(distribution)
    version = getattr(module, "__version__", None) if module is not None else None
    if isinstance(version, str):
        return version
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        return ""
    try:
        return metadata.version(distribution)
    except Exception:
        return ""


def torch_version() -> str:
    """torch.__version__ when torch is imported, else the installed distribution's version."""
    module = sys.modules.get("torch")
    version = getattr(module, "__version__", None) if module is not None else None
    return str(version) if version is not None else installed_version("torch")


def accelerate_version() -> str:
    return installed_version("accelerate")


def require_torch(minimum: str = TORCH_MIN, why: str = "") -> Any:
    """Imports torch and checks its version; ProbeEnvironmentError with a clear message otherwise."""
    try:
        import torch  # noqa: F401
    except Exception as exc:  # ImportError, or a broken install raising anything else
        raise ProbeEnvironmentError(
            f"PyTorch is not importable in this Python ({sys.executable}): {type(exc).__name__}: {exc}. "
            f"The runtime probe needs torch >= {minimum}"
            + (f" ({why})" if why else "")
            + "; install it in the environment that runs the probe, or pass --python."
        ) from exc
    if not version_at_least(torch.__version__, minimum):
        raise ProbeEnvironmentError(
            f"PyTorch {torch.__version__} is too old: the runtime probe needs torch >= {minimum}"
            + (f" ({why})" if why else "")
            + "."
        )
    try:
        import torch.distributed as dist
        available = dist.is_available()
    except Exception:
        available = False
    if not available:
        raise ProbeEnvironmentError(
            f"PyTorch {torch.__version__} was built without torch.distributed; the runtime probe needs it."
        )
    return torch


def _require_package(name: str, minimum: str, what: str, why: str) -> Any:
    """Import `name` (accelerate, transformers, peft) at `minimum` or newer, else ProbeEnvironmentError."""
    import importlib

    reason = f" ({why})" if why else ""
    try:
        module = importlib.import_module(name)
    except Exception as exc:
        raise ProbeEnvironmentError(
            f"{name} is not importable in this Python ({sys.executable}): {type(exc).__name__}: {exc}. "
            f"Replaying {what} needs {name} >= {minimum}" + reason + "."
        ) from exc
    version = getattr(module, "__version__", "") or installed_version(name)
    if not version_at_least(version, minimum):
        raise ProbeEnvironmentError(
            f"{name} {version} is too old: replaying this finding needs {name} >= {minimum}" + reason + "."
        )
    return module


def require_accelerate(minimum: str = ACCELERATE_MIN, why: str = "") -> Any:
    return _require_package("accelerate", minimum, "an accelerate finding", why)


def require_transformers(minimum: str = TRANSFORMERS_MIN, why: str = "") -> Any:
    return _require_package("transformers", minimum, "a Trainer finding", why)


def require_peft(minimum: str = PEFT_MIN, why: str = "") -> Any:
    return _require_package("peft", minimum, "a PEFT finding", why)


def _first_attr(candidates) -> Optional[Any]:
    """The first (module, attribute) of `candidates` that imports; None when none does."""
    for module_name, attr in candidates:
        try:
            module = importlib.import_module(module_name)
        except Exception:
            continue
        value = getattr(module, attr, None)
        if value is not None:
            return value
    return None


def dtensor_class() -> Optional[type]:
    return _first_attr([("torch.distributed.tensor", "DTensor"), ("torch.distributed._tensor", "DTensor")])


def flat_parameter_class() -> Optional[type]:
    return _first_attr([
        ("torch.distributed.fsdp._flat_param", "FlatParameter"),
        ("torch.distributed.fsdp.flat_param", "FlatParameter"),
    ])


def fsdp1_class() -> Optional[type]:
    return _first_attr([("torch.distributed.fsdp", "FullyShardedDataParallel")])


def fsdp2_module_class() -> Optional[type]:
    """FSDPModule: the class fully_shard mixes into every module it wraps."""
    return _first_attr([
        ("torch.distributed.fsdp", "FSDPModule"),
        ("torch.distributed._composable.fsdp", "FSDPModule"),
    ])


def fully_shard_function() -> Any:
    """torch.distributed.fsdp.fully_shard (2.6+) or torch.distributed._composable.fsdp.fully_shard (2.4, 2.5)."""
    function = _first_attr([
        ("torch.distributed.fsdp", "fully_shard"),
        ("torch.distributed._composable.fsdp", "fully_shard"),
    ])
    if function is None:
        raise ProbeEnvironmentError(
            f"fully_shard (FSDP2) is not available in PyTorch {torch_version()}: it needs torch >= {TORCH_MIN_FSDP2}."
        )
    return function


def register_fsdp_forward_method_function() -> Any:
    """torch.distributed.fsdp.register_fsdp_forward_method (2.6+) or the _composable spelling (2.4, 2.5)."""
    function = _first_attr([
        ("torch.distributed.fsdp", "register_fsdp_forward_method"),
        ("torch.distributed._composable.fsdp", "register_fsdp_forward_method"),
    ])
    if function is None:
        raise ProbeEnvironmentError(
            f"register_fsdp_forward_method is not available in PyTorch {torch_version()}."
        )
    return function
