"""Helpers the generated replay programs import (runtime_probe/orchestrator/Replay.cpp).

A replay program is a small training program that reproduces one finding's pattern on a
stand-in model. It looks like this:

    from shardlint_probe import replay_runtime as rt

    def replay(s):                          # s: a ReplaySession
        torch = s.require_torch(rt.compat.TORCH_MIN_FSDP2, "fully_shard")
        env = s.init_distributed()          # torch.distributed.run's environment
        fully_shard = rt.compat.fully_shard_function()
        model = rt.build_standin().to(env.device)
        optimizer = s.make_optimizer(model.parameters())
        s.phase("wrap")
        for block in model.blocks:
            fully_shard(block, mesh=env.mesh)
        fully_shard(model, mesh=env.mesh)
        s.run_first_step(model, optimizer)

    if __name__ == "__main__":
        sys.exit(rt.main(replay, finding={...}, shape="optimizer-before-wrap", wrap_api="fully_shard"))

``rt.main`` installs the instrumentation (events with file:line in the program), runs
``replay``, captures any exception with the phase it was raised in, writes
$SHARDLINT_PROBE_OUT/rank<R>.json and returns the exit code (report.EXIT_*). Exceptions raised
in the "setup" phase (imports, process group, building the accelerator or the model) or by the
checks are the probe's own failures (probe_error, exit 3), never a finding's evidence.

torch and accelerate are imported lazily: importing this module needs neither.

Why one module of over 800 lines (issue 34): about half of it is ``ReplaySession``, one class whose
methods the generated programs call on one object ``s``; it cannot be split without rewriting it.
The module-level helpers around it (the stand-in model, the process group, Fabric, the optimizer)
are what those programs reach as ``rt.NAME`` and what the session calls, sharing the module's
constants and its lazy ``rt.StandIn`` (PEP 562 ``__getattr__``); and this file's text is part of the
key of the CPU self-test's cache (``selfTestCacheFile`` in runtime_probe/orchestrator/
ProbeEnvironment.cpp), which a helper moved to another module would silently leave out.
"""

from __future__ import annotations

import functools
import importlib
import os
import socket
import sys
import tempfile
import threading
import time
import traceback
from datetime import timedelta
from typing import Any, Callable, Dict, Optional

from . import checks, compat, instrument
from . import report as report_mod

# The stand-in model: embedding and head at the root, blocks in a ModuleList, a final norm.
VOCAB = 256
DIM = 64
N_BLOCKS = 2
BATCH = 4
SEQ = 16
SEED = 0
LR = 1e-2
DEFAULT_OPTIMIZER = "torch.optim.AdamW"
DEFAULT_TIMEOUT_SECONDS = 120  # collectives; $SHARDLINT_PROBE_TIMEOUT overrides


# ---- the stand-in model ---------------------------------------------------------------------------

_classes: Optional[tuple] = None


def _standin_classes() -> tuple:
    global _classes
    if _classes is None:
        import torch
        from torch import nn

        class StandInBlock(nn.Module):
            """A pre-norm MLP block with a residual connection."""

            def __init__(self, dim: int) -> None:
                super().__init__()
                self.norm = nn.LayerNorm(dim)
                self.up = nn.Linear(dim, 4 * dim)
                self.down = nn.Linear(4 * dim, dim)

            def forward(self, x):
                return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))

        class StandIn(nn.Module):
            """embed -> blocks -> norm -> head, like a decoder-only language model."""

            def __init__(self, vocab: int, dim: int, n_blocks: int) -> None:
                super().__init__()
                self.embed = nn.Embedding(vocab, dim)
                self.blocks = nn.ModuleList([StandInBlock(dim) for _ in range(n_blocks)])
                self.norm = nn.LayerNorm(dim)
                self.head = nn.Linear(dim, vocab, bias=False)

            def forward(self, ids):
                h = self.embed(ids)
                for block in self.blocks:
                    h = block(h)
                return self.head(self.norm(h))

        StandInBlock.__module__ = StandIn.__module__ = __name__
        StandInBlock.__qualname__, StandIn.__qualname__ = "StandInBlock", "StandIn"
        _classes = (StandIn, StandInBlock)
    return _classes


def __getattr__(name: str) -> Any:  # PEP 562: rt.StandIn / rt.StandInBlock, built on first use
    if name == "StandIn":
        return _standin_classes()[0]
    if name == "StandInBlock":
        return _standin_classes()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def standin_block_class() -> type:
    return _standin_classes()[1]


def build_standin(vocab: int = VOCAB, dim: int = DIM, n_blocks: int = N_BLOCKS, seed: int = SEED) -> Any:
    """The stand-in model, initialised identically on every rank (seeded)."""
    import torch

    torch.manual_seed(seed)
    return _standin_classes()[0](vocab, dim, n_blocks)


def batch(rank: int, device: Any = None, vocab: int = VOCAB, batch_size: int = BATCH, seq: int = SEQ,
          seed: int = SEED) -> tuple:
    """(input ids, next-token targets), different on every rank, on `device`."""
    import torch

    generator = torch.Generator().manual_seed(seed + 1000 + int(rank))
    ids = torch.randint(0, vocab, (batch_size, seq + 1), generator=generator)
    inputs, targets = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()
    if device is not None:
        inputs, targets = inputs.to(device), targets.to(device)
    return inputs, targets


def build_standin_on_meta(vocab: int = VOCAB, dim: int = DIM, n_blocks: int = N_BLOCKS) -> Any:
    """The stand-in model on the meta device (no storage), as a script builds a large model before
    materialising it with to_empty."""
    import torch

    with torch.device("meta"):
        return _standin_classes()[0](vocab, dim, n_blocks)


# ---- replaced parameters (SL105) ------------------------------------------------------------------

# LoRA on the blocks' two Linear layers: 2 blocks x 2 layers x (lora_A, lora_B) = 8 adapter parameters.
LORA_TARGETS = ("up", "down")
LORA_RANK = 4
REPLACEMENTS = ("get_peft_model", "peft_from_pretrained", "to_empty", "load_state_dict_assign")


def lora_config() -> Any:
    from peft import LoraConfig

    return LoraConfig(r=LORA_RANK, lora_alpha=2 * LORA_RANK, lora_dropout=0.0, target_modules=list(LORA_TARGETS))


def save_adapter(rank: int) -> str:
    """A LoRA adapter of the stand-in, saved by PEFT (save_pretrained) into this rank's own folder of the
    report directory, for PeftModel.from_pretrained to load. Returns the folder."""
    from peft import get_peft_model

    path = os.path.join(output_dir(), f"lora-adapter-rank{int(rank)}")
    get_peft_model(build_standin(), lora_config()).save_pretrained(path)
    return path


# ---- transformers' Trainer (SL202) ----------------------------------------------------------------

_trainer_model_class: Optional[type] = None


def trainer_standin() -> Any:
    """The stand-in wrapped for transformers' Trainer: forward(input_ids, labels) returns {"loss", "logits"}."""
    global _trainer_model_class
    import torch
    from torch import nn

    if _trainer_model_class is None:

        class TrainerStandIn(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.lm = build_standin()

            def forward(self, input_ids, labels=None):
                logits = self.lm(input_ids)
                out = {"logits": logits}
                if labels is not None:
                    out["loss"] = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                                                                    labels.reshape(-1))
                return out

        TrainerStandIn.__module__ = __name__
        TrainerStandIn.__qualname__ = "TrainerStandIn"
        _trainer_model_class = TrainerStandIn
    return _trainer_model_class()


def trainer_dataset(n: int = 4 * BATCH) -> list:
    """`n` examples of next-token prediction ({"input_ids", "labels"}), the same list on every rank (the
    Trainer's sampler gives each rank its own share)."""
    examples = []
    for i in range(n):
        inputs, targets = batch(i, batch_size=1)
        examples.append({"input_ids": inputs[0], "labels": targets[0]})
    return examples


def trainer_arguments(env: "DistEnv", fsdp: Optional[str]) -> Any:
    """TrainingArguments for one step (max_steps=1) of 2 examples per rank, nothing saved or logged;
    `fsdp`: the TrainingArguments' fsdp value (None: not given)."""
    from transformers import TrainingArguments

    kwargs: Dict[str, Any] = dict(output_dir=os.path.join(output_dir(), "trainer-out"), report_to=[], max_steps=1,
                                  per_device_train_batch_size=2, save_strategy="no", logging_strategy="no",
                                  disable_tqdm=True)
    if fsdp is not None:
        kwargs["fsdp"] = fsdp
    kwargs.update(trainer_device_kwargs(env))
    return TrainingArguments(**kwargs)


class _FirstStepDone(Exception):
    """Raised from the optimizer's post-step hook to leave trainer.train() after its first step."""


# ---- the process group ----------------------------------------------------------------------------


class DistEnv:
    """What init_distributed set up."""

    def __init__(self, rank: int, world_size: int, local_rank: int, backend: str, device: Any) -> None:
        self.rank = rank
        self.world_size = world_size
        self.local_rank = local_rank
        self.backend = backend
        self.device = device                     # torch.device for the model and the data
        # FSDP1's device_id. On CPU it must be given: without it FSDP1 (torch 2.6+) looks for an
        # accelerator and raises "FSDP needs a non-CPU accelerator device" when there is none.
        self.device_id = device
        self._mesh = None

    @property
    def mesh(self) -> Any:
        """A 1-D DeviceMesh over all ranks (for fully_shard), created on first use."""
        if self._mesh is None:
            from torch.distributed.device_mesh import init_device_mesh

            self._mesh = init_device_mesh(self.device.type, (self.world_size,))
        return self._mesh


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def init_distributed(report: Any, backend: Optional[str] = None) -> DistEnv:
    """init_process_group from torch.distributed.run's environment (RANK, WORLD_SIZE, LOCAL_RANK,
    MASTER_ADDR, MASTER_PORT); a single rank when they are unset.

    The backend: `backend`, else $SHARDLINT_PROBE_BACKEND (auto | nccl | gloo); auto is NCCL when
    this local rank has a CUDA device, gloo on CPU otherwise.
    """
    torch = compat.require_torch()
    import torch.distributed as dist

    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        os.environ.setdefault("RANK", "0")
        os.environ.setdefault("WORLD_SIZE", "1")
        os.environ.setdefault("LOCAL_RANK", "0")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
        report.add_note("not started by torch.distributed.run: ran as a single rank")
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    requested = (backend or os.environ.get("SHARDLINT_PROBE_BACKEND") or "auto").lower()
    cuda_ok = torch.cuda.is_available() and torch.cuda.device_count() > local_rank
    if requested == "auto":
        requested = "nccl" if cuda_ok and dist.is_nccl_available() else "gloo"
    if requested == "nccl":
        if not dist.is_nccl_available():
            raise compat.ProbeEnvironmentError(f"backend nccl: this PyTorch {torch.__version__} has no NCCL")
        if not cuda_ok:
            raise compat.ProbeEnvironmentError(
                f"backend nccl: local rank {local_rank} has no CUDA device "
                f"({torch.cuda.device_count() if torch.cuda.is_available() else 0} visible)")
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    elif requested == "gloo":
        device = torch.device("cpu")
    else:
        raise compat.ProbeEnvironmentError(f"unknown backend {requested!r}: use auto, nccl or gloo")
    timeout = timedelta(seconds=report_mod.env_int("SHARDLINT_PROBE_TIMEOUT", DEFAULT_TIMEOUT_SECONDS))
    if not dist.is_initialized():
        try:
            dist.init_process_group(backend=requested, timeout=timeout)
        except Exception as exc:
            raise compat.ProbeEnvironmentError(
                f"could not initialise the {requested} process group (rank {rank} of {world_size}): "
                f"{type(exc).__name__}: {exc}") from exc
    report.backend = requested
    report.rank = dist.get_rank()
    report.world_size = dist.get_world_size()
    return DistEnv(report.rank, report.world_size, local_rank, requested, device)


def _destroy_process_group() -> None:
    if "torch" not in sys.modules:
        return
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    except Exception:
        pass


def fsdp_version_kwargs(version: int) -> Dict[str, int]:
    """{"fsdp_version": version} for accelerate 1.6+, whose FullyShardedDataParallelPlugin takes
    it; {} before (FSDP1 only: the plugin's default is then FSDP1 anyway)."""
    if compat.version_at_least(compat.accelerate_version(), compat.ACCELERATE_MIN_FSDP2):
        return {"fsdp_version": int(version)}
    if int(version) != 1:
        raise compat.ProbeEnvironmentError(
            f"accelerate {compat.accelerate_version() or '(not installed)'} has no FSDP2: "
            f"it needs accelerate >= {compat.ACCELERATE_MIN_FSDP2}")
    return {}


def enable_accelerate_fsdp_on_cpu(accelerator: Any, plugin: Any) -> Optional[str]:
    """In CPU processes accelerate leaves distributed_type at MULTI_CPU even with an FSDP plugin
    (AcceleratorState switches to FSDP only for MULTI_GPU, MULTI_NPU, ...). This switches the state
    to FSDP with `plugin`, as accelerate does on accelerators, and returns the note that says so;
    None when there was nothing to switch."""
    kind = getattr(getattr(accelerator, "distributed_type", None), "name", "")
    if kind != "MULTI_CPU" or plugin is None:
        return None
    from accelerate.utils import DistributedType

    import torch

    from accelerate.state import PartialState

    state = accelerator.state
    state.distributed_type = DistributedType.FSDP
    state.fsdp_plugin = plugin
    # Every AcceleratorState() made later (prepare() makes one for each AcceleratedOptimizer) copies
    # PartialState's shared fields back over its own: switch them there too, or the optimizer's preparation
    # turns the run back into MULTI_CPU (and get_state_dict, save_model, clip_grad_norm_ stop taking the
    # FSDP paths).
    partial = PartialState._shared_state
    if "distributed_type" in partial:
        partial["distributed_type"] = DistributedType.FSDP
    note = (f"accelerate {compat.accelerate_version()} enables FSDP only on accelerators (distributed_type "
            f"MULTI_CPU in CPU processes): the probe set distributed_type FSDP with the plugin, as accelerate "
            f"does on GPUs")
    device = getattr(state, "device", None)
    if device is not None and device.type == "cpu" and device.index is not None:
        # accelerate names the CPU `cpu:<rank>`; FSDP1 passes it as device_id and then refuses it
        # ("Inconsistent compute device and `device_id`: cpu vs cpu:0").
        state.device = torch.device("cpu")
        if "device" in partial:
            partial["device"] = torch.device("cpu")
        note += f", and its device `cpu` instead of `{device}`, which FSDP1 rejects as another device"
    return note


# ---- Lightning Fabric -----------------------------------------------------------------------------


def _fabric_modules() -> tuple:
    """(Fabric, FSDPStrategy) from `lightning.fabric` (the `lightning` package) or `lightning_fabric`."""
    errors = []
    for package in ("lightning.fabric", "lightning_fabric"):
        try:
            fabric_mod = importlib.import_module(package)
            strategies = importlib.import_module(package + ".strategies")
            return fabric_mod.Fabric, strategies.FSDPStrategy
        except Exception as exc:  # ImportError, or a lightning that fails to import
            errors.append(f"{package}: {type(exc).__name__}: {exc}")
    raise compat.ProbeEnvironmentError(
        "Lightning Fabric is not importable in this Python (" + sys.executable + "): " + "; ".join(errors))


def output_dir() -> str:
    """The directory the rank reports go to (a Trainer's output_dir in a replay)."""
    return report_mod.output_dir()


def trainer_device_kwargs(env: DistEnv) -> Dict[str, Any]:
    """TrainingArguments keywords that keep a Trainer on the CPU in CPU processes: `use_cpu`
    (transformers 4.34+) or `no_cuda` (before)."""
    if env.device.type != "cpu":
        return {}
    import inspect

    from transformers import TrainingArguments

    params = inspect.signature(TrainingArguments).parameters
    return {"use_cpu": True} if "use_cpu" in params else {"no_cuda": True}


def fabric_device_kwargs(env: DistEnv) -> Dict[str, Any]:
    """Fabric's accelerator, devices and num_nodes for the ranks torch.distributed.run started."""
    local = report_mod.env_int("LOCAL_WORLD_SIZE", env.world_size)
    return {"accelerator": "cuda" if env.device.type == "cuda" else "cpu", "devices": local,
            "num_nodes": max(1, env.world_size // max(1, local))}


def fabric_fsdp_strategy(env: DistEnv, use_orig_params: bool) -> Any:
    """Lightning's FSDPStrategy; in CPU processes a subclass that lets it run there.

    Fabric refuses FSDP on CPU ("FSDP is only available on GPU", a check in its connector that a
    subclass of FSDPStrategy passes), and its setup_module passes `device_id=root_device.index`, None
    on CPU, which FSDP1 refuses without an accelerator. The subclass only gives FSDP1 the CPU
    device_id; Fabric's own setup_module and setup_optimizer run unchanged.
    """
    _, strategy_cls = _fabric_modules()
    kwargs = {} if use_orig_params else {"use_orig_params": False}
    if env.device.type != "cpu":
        return strategy_cls(**kwargs)

    class CpuFSDPStrategy(strategy_cls):  # type: ignore[misc, valid-type]
        def setup_module(self, module: Any) -> Any:
            import torch
            import torch.distributed.fsdp as fsdp_mod

            original = fsdp_mod.FullyShardedDataParallel

            class CpuFSDP(original):  # type: ignore[misc, valid-type]
                def __init__(self, *args: Any, device_id: Any = None, **kw: Any) -> None:
                    super().__init__(*args, device_id=torch.device("cpu") if device_id is None else device_id, **kw)

            fsdp_mod.FullyShardedDataParallel = CpuFSDP
            try:
                return super().setup_module(module)
            finally:
                fsdp_mod.FullyShardedDataParallel = original

    return CpuFSDPStrategy(**kwargs)


# ---- optimizers -----------------------------------------------------------------------------------


CLIP_MAX_NORM = 1.0  # SL203's replays clip with this max_norm


def _norm_value(norm: Any) -> float:
    """A norm a clip returned (a tensor, a DTensor, a float) as a float on this rank."""
    if hasattr(norm, "full_tensor"):
        norm = norm.full_tensor()
    return float(norm)


def full_gradient_norm(model: Any) -> Any:
    """The 2-norm of all of `model`'s gradients as whole tensors: FSDP2's DTensor gradients gathered with
    full_tensor() (a collective every rank runs). SL203's reference for FSDP2."""
    import torch

    grads = [p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
             for p in model.parameters() if p.grad is not None]
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float()) for g in grads]))


def resolve_class(qualified: str) -> Any:
    """'torch.optim.AdamW' -> the class, importing the longest importable module prefix."""
    parts = [p for p in qualified.split(".") if p]
    if len(parts) < 2:
        raise ImportError(f"not a qualified class name: {qualified!r}")
    last_error: Optional[BaseException] = None
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError as exc:
            last_error = exc
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError as exc:
            raise ImportError(f"{qualified}: {exc}") from exc
        return obj
    raise ImportError(str(last_error) if last_error else qualified)


# ---- one replay -----------------------------------------------------------------------------------


class ReplaySession:
    """The state of one replay on one rank: the report, the instrumentation, the process group."""

    def __init__(self, finding: Dict[str, Any], shape: str = "", wrap_api: str = "",
                 optimizer: str = DEFAULT_OPTIMIZER) -> None:
        self.report = report_mod.RankReport(mode="replay")
        self.report.set_finding(finding.get("code", ""), finding.get("path", ""), int(finding.get("line", 0) or 0))
        self.tracker = instrument.Tracker(self.report)
        self.shape = shape
        self.wrap_api = wrap_api
        self.optimizer_name = optimizer or DEFAULT_OPTIMIZER
        self.env: Optional[DistEnv] = None
        self.leave_at_once = False  # a collective is still pending (collective_on's watchdog)

    # ---- steps the program calls ----

    def phase(self, name: str) -> None:
        self.report.phase = name

    def require_torch(self, minimum: str = compat.TORCH_MIN, why: str = "") -> Any:
        return compat.require_torch(minimum, why)

    def require_accelerate(self, minimum: str = compat.ACCELERATE_MIN, why: str = "") -> Any:
        return compat.require_accelerate(minimum, why)

    def require_transformers(self, minimum: str = compat.TRANSFORMERS_MIN, why: str = "") -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the replay needs nothing from the Hub
        return compat.require_transformers(minimum, why)

    def require_peft(self, minimum: str = compat.PEFT_MIN, why: str = "") -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the adapter is saved and loaded locally
        return compat.require_peft(minimum, why)

    def replace_parameters(self, model: Any, how: str, adapter: str = "") -> Any:
        """Replaces the model's parameters as the finding's call does; returns the model to use.

        - get_peft_model: LoRA adapters on the blocks' Linear layers (PEFT freezes the base weights);
        - peft_from_pretrained: PeftModel.from_pretrained(model, adapter, is_trainable=True) of the adapter
          save_adapter() wrote;
        - to_empty: model.to_empty(device=...) (every parameter a new tensor), then the stand-in's seeded
          weights copied in (load_state_dict without assign), so every rank starts alike;
        - load_state_dict_assign: model.load_state_dict(state, assign=True): the loaded tensors become the
          parameters.
        """
        self.tracker.record("replace_params")
        device = self.env.device if self.env is not None else None
        if how == "get_peft_model":
            from peft import get_peft_model

            return get_peft_model(model, lora_config())
        if how == "peft_from_pretrained":
            from peft import PeftModel

            return PeftModel.from_pretrained(model, adapter, is_trainable=True)
        state = build_standin().state_dict()
        if device is not None:
            state = {k: v.to(device) for k, v in state.items()}
        if how == "to_empty":
            model.to_empty(device=device if device is not None else "cpu")
            model.load_state_dict(state)
            return model
        if how == "load_state_dict_assign":
            model.load_state_dict(state, assign=True)
            return model
        raise compat.ProbeEnvironmentError(f"unknown parameter replacement {how!r}: one of {', '.join(REPLACEMENTS)}")

    def save_adapter(self) -> str:
        """A LoRA adapter saved on disk for PeftModel.from_pretrained (see save_adapter())."""
        return save_adapter(self.report.rank)

    def launched_with_fsdp(self, fsdp_version: int) -> None:
        """The environment `accelerate launch --config_file CONFIG` gives a script whose config enables FSDP:
        ACCELERATE_USE_FSDP=true and FSDP_VERSION. The Trainer's Accelerator builds its FSDP plugin from them."""
        os.environ["ACCELERATE_USE_FSDP"] = "true"
        os.environ["FSDP_VERSION"] = str(int(fsdp_version))
        self.report.add_note(f"FSDP enabled as `accelerate launch` with an FSDP config does (ACCELERATE_USE_FSDP=true, "
                             f"FSDP_VERSION={int(fsdp_version)}); the TrainingArguments do not mention FSDP")

    def trainer_fsdp_on_cpu(self) -> None:
        """On a gloo/CPU run, the Accelerator the Trainer builds gets the switch to FSDP that accelerate makes
        only on accelerators (check_accelerator for the replays' own Accelerator): without it the Trainer sees
        no FSDP plugin (`accelerator.state.fsdp_plugin` is None in CPU processes), so it neither refuses
        `optimizers=` nor shards. The plugin is the one the Trainer passes (from its TrainingArguments), else
        the one accelerate builds from ACCELERATE_USE_FSDP=true. Nothing changes with NCCL."""
        if self.env is None or self.env.backend != "gloo":
            return
        import inspect

        import accelerate

        accelerator_cls = accelerate.Accelerator
        original = accelerator_cls.__init__
        session = self

        @functools.wraps(original)
        def __init__(accelerator: Any, *args: Any, **kwargs: Any) -> None:
            original(accelerator, *args, **kwargs)
            try:
                plugin = inspect.signature(original).bind(accelerator, *args, **kwargs).arguments.get("fsdp_plugin")
            except TypeError:
                plugin = kwargs.get("fsdp_plugin")
            if plugin is None and os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true":
                from accelerate.utils import FullyShardedDataParallelPlugin

                plugin = FullyShardedDataParallelPlugin()
            note = enable_accelerate_fsdp_on_cpu(accelerator, plugin)
            if note:
                session.report.add_note("in the Accelerator the Trainer builds: " + note)

        accelerator_cls.__init__ = __init__

    def run_trainer_first_step(self, trainer: Any) -> None:
        """trainer.train() up to its first optimizer.step(), with the checks around that step (torch's global
        optimizer step hooks, as in script mode), then out of the training loop."""
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        state: Dict[str, Any] = {"probe": None, "done": False}

        def pre(optimizer: Any, args: Any, kwargs: Any) -> None:
            if state["probe"] is not None:
                return None
            self.tracker.record("optimizer_step")
            model = getattr(trainer, "model_wrapped", None) or trainer.model
            probe = checks.FirstStepProbe(model, optimizer, self.report, self.tracker.was_parameter)
            state["probe"] = probe
            try:
                probe.before()
            except Exception as exc:  # the probe's own failure, never the Trainer's
                traceback.print_exc()
                self.report.set_probe_error(f"checks before the step failed: {type(exc).__name__}: {exc}")
                state["probe"] = False  # no checks after the step either
            self.phase("step")
            return None

        def post(optimizer: Any, args: Any, kwargs: Any) -> None:
            probe = state["probe"]
            if probe is None or state["done"] or (probe and optimizer is not probe.optimizer):
                return
            state["done"] = True
            self.report.reached_step = True
            self.phase("checks")
            if probe:
                probe.after()
            raise _FirstStepDone()

        handles = [register_optimizer_step_pre_hook(pre), register_optimizer_step_post_hook(post)]
        self.phase("train")
        try:
            trainer.train()
        except _FirstStepDone:
            pass
        finally:
            for h in handles:
                h.remove()
        if not self.report.reached_step:
            raise RuntimeError("trainer.train() returned without an optimizer step")

    def require_fabric(self) -> Any:
        """Lightning's Fabric class (lightning.fabric or lightning_fabric); ProbeEnvironmentError if absent."""
        fabric_cls, _ = _fabric_modules()
        if self.env is not None and self.env.device.type == "cpu":
            self.report.add_note("Lightning Fabric refuses FSDP on CPU (\"FSDP is only available on GPU\"): the "
                                 "replay runs Fabric's FSDPStrategy through a subclass that gives FSDP1 the CPU device")
        return fabric_cls

    def init_distributed(self) -> DistEnv:
        self.env = init_distributed(self.report)
        return self.env

    def check_accelerator(self, accelerator: Any, plugin: Any = None) -> None:
        """accelerate turns FSDP on only for multi-accelerator setups (MULTI_GPU, MULTI_NPU, ...; see
        AcceleratorState in accelerate/state.py): on CPU processes it stays MULTI_CPU and prepare()
        would not shard at all. On a gloo/CPU run the probe switches the state to FSDP with the
        finding's plugin, which is what accelerate itself does on GPUs, and says so in the report;
        prepare() then runs accelerate's own FSDP code. Anything else replays nothing."""
        if self.env is not None and self.env.backend == "gloo":
            note = enable_accelerate_fsdp_on_cpu(accelerator, plugin)
            if note:
                self.report.add_note(note)
        kind = getattr(getattr(accelerator, "distributed_type", None), "name", str(getattr(accelerator, "distributed_type", "")))
        if kind != "FSDP":
            raise compat.ProbeEnvironmentError(
                f"accelerate did not enable FSDP here (distributed_type {kind}; device "
                f"{getattr(accelerator, 'device', '?')}): accelerate shards only on accelerators such as CUDA GPUs")

    def optimizer_class(self) -> Any:
        """The finding's optimizer class when importable, else torch.optim.AdamW (noted)."""
        import torch

        name = self.optimizer_name
        try:
            cls = resolve_class(name)
            if not (isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer)):
                raise TypeError(f"{name} is not a torch.optim.Optimizer subclass")
            return cls
        except Exception as exc:
            if name != DEFAULT_OPTIMIZER:
                self.report.add_note(f"optimizer {name} is not usable here ({type(exc).__name__}: {exc}): "
                                     f"replayed with {DEFAULT_OPTIMIZER}")
            return torch.optim.AdamW

    def make_optimizer(self, params: Any, **kwargs: Any) -> Any:
        """Builds the finding's optimizer over `params` (tensors or param-group dicts)."""
        import torch

        self.phase("optimizer")
        params = list(params)
        kwargs.setdefault("lr", LR)
        cls = self.optimizer_class()
        events = len(self.report.events)
        try:
            optimizer = cls(params, **kwargs)
        except Exception as exc:
            if cls is torch.optim.AdamW:
                raise
            del self.report.events[events:]  # the failed construction is not an event of the replay
            self.report.add_note(f"{self.optimizer_name}(params, lr={kwargs['lr']}) failed "
                                 f"({type(exc).__name__}: {exc}): replayed with {DEFAULT_OPTIMIZER}")
            cls = torch.optim.AdamW
            optimizer = cls(params, **kwargs)
        self.report.optimizer_class = f"{cls.__module__}.{cls.__qualname__}"
        return optimizer

    def run_first_step(self, model: Any, optimizer: Any, *, scale: Any = None, device: Any = None,
                       backward: Optional[Callable[[Any], None]] = None,
                       forward: Optional[Callable[[Any], Any]] = None) -> None:
        """One forward, backward and optimizer.step() on this rank's batch, with the checks around
        the step. `scale`: a tensor the logits are multiplied by (a free parameter in the loss);
        `backward`: e.g. accelerator.backward (default: loss.backward()); `forward`: what computes the
        logits, e.g. model.forward (default: model, through its __call__)."""
        import torch

        if device is None:
            device = self.env.device if self.env is not None else torch.device("cpu")
        inputs, targets = batch(self.report.rank, device)
        self.phase("forward")
        logits = (model if forward is None else forward)(inputs)
        if scale is not None:
            logits = logits * scale
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))
        self.phase("backward")
        if backward is None:
            loss.backward()
        else:
            backward(loss)
        self.phase("step")
        self.tracker.record("optimizer_step")
        probe: Optional[checks.FirstStepProbe] = checks.FirstStepProbe(model, optimizer, self.report,
                                                                       self.tracker.was_parameter)
        try:
            probe.before()
        except Exception as exc:
            traceback.print_exc()
            self.report.set_probe_error(f"checks before the step failed: {type(exc).__name__}: {exc}")
            probe = None
        self.phase("step")
        optimizer.step()
        self.report.reached_step = True
        self.phase("checks")
        if probe is not None:
            probe.after()

    def check_tie(self, model: Any, embed: Any, head: Any, fsdp1: bool = False) -> None:
        """SL207: after the step, are the tied weights of `embed` and `head` still one value? Full
        tensors on every rank (FSDP2: DTensor.full_tensor(), a collective every rank runs; FSDP1:
        summon_full_params on the root). Sets report.tied_apart and tied_max_diff."""
        import torch

        self.phase("checks")

        def full(t: Any) -> Any:
            return t.full_tensor() if hasattr(t, "full_tensor") else t

        if fsdp1:
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

            with FSDP.summon_full_params(model):
                e, h = embed.weight.detach().clone(), head.weight.detach().clone()
        else:
            e, h = full(embed.weight.detach()), full(head.weight.detach())
        same_object = embed.weight is head.weight
        if e.shape != h.shape:
            self.report.tied_apart, self.report.tied_max_diff = True, None
            self.report.add_note(f"the tied weights have different shapes after the step: {tuple(e.shape)} and {tuple(h.shape)}")
            return
        diff = float((e.float() - h.float()).abs().max().item())
        self.report.tied_apart = diff > 0.0
        self.report.tied_max_diff = diff
        self.report.add_note(f"after the step the tied weights are {'one parameter' if same_object else 'two parameters'}, "
                             f"largest difference {diff:.3g}")

    # ---- SL203: the gradient norm a clip computes on each rank ----

    def clip_step(self, model: Any, optimizer: Any, clip: Callable[[], Any], reference: Callable[[], Any], *,
                  backward: Optional[Callable[[Any], None]] = None, device: Any = None) -> None:
        """The first step with the finding's clip between the backward and optimizer.step().

        After the backward, `reference()` (the global norm: FSDP1's own clip_grad_norm_, or the norm of the
        full FSDP2 gradients) and then `clip()` (the finding's clip) run on the same gradients (they are saved
        first and restored in between), with max_norm CLIP_MAX_NORM. Each rank notes
        "rank R clip norm X; global norm Y", which the orchestrator compares across ranks."""
        import torch

        params = [p for p in model.parameters()]

        def clipped_backward(loss: Any) -> None:
            if backward is None:
                loss.backward()
            else:
                backward(loss)
            self.phase("clip")
            saved = [None if p.grad is None else p.grad.detach().clone() for p in params]
            ref = _norm_value(reference())
            for p, g in zip(params, saved):
                if g is not None:
                    p.grad.copy_(g)
            norm = _norm_value(clip())
            rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
            self.report.add_note(f"rank {rank} clip norm {norm:.6g}; global norm {ref:.6g}")
            self.phase("backward")

        self.run_first_step(model, optimizer, backward=clipped_backward, device=device)

    # ---- SL204: a collective state dict under a rank guard ----

    def short_timeout_group(self, seconds: int) -> Any:
        """A process group over every rank whose collectives time out after `seconds` (every rank calls it)."""
        import torch.distributed as dist
        return dist.new_group(timeout=timedelta(seconds=seconds))

    def scratch_dir(self, name: str) -> str:
        """A fresh folder for what a replay writes (under the run's output folder when there is one)."""
        base = os.environ.get("SHARDLINT_PROBE_OUT") or tempfile.gettempdir()
        path = os.path.join(base, f"scratch-rank{self.report.rank}", name)
        os.makedirs(path, exist_ok=True)
        return path

    def collective_on(self, label: str, call: Callable[[], Any], ranks: Any, timeout_seconds: int,
                      watchdog: bool = False) -> None:
        """Makes a collective state-dict call (`label` names it in the notes) on `ranks` only (the finding's
        rank guard), or on every rank (None).

        A rank that calls it and times out records the exception and how long it waited (it does not raise:
        the launcher would kill the other ranks before they report); a rank that skips it says so. With
        `watchdog` (a call on the default group, whose timeout is long) the call runs in a thread and the
        probe stops waiting after `timeout_seconds`, noting that the call had not returned; the rank then
        leaves without tearing down the process group (a collective is still pending). The ranks that skip
        the call wait on the store until the caller is done, so that they stay alive without joining it."""
        import torch.distributed as dist
        rank = dist.get_rank()
        self.phase("checks")
        key = "shardlint-probe-collective-done"
        store = dist.distributed_c10d._get_default_store()
        if ranks is not None and rank not in ranks:
            self.report.add_note(f"rank {rank} skipped {label}")
            store.wait([key], timedelta(seconds=timeout_seconds * 12 + 60))
            return
        started = time.monotonic()
        outcome: Dict[str, Any] = {}

        def target() -> None:
            try:
                outcome["value"] = call()
            except BaseException as exc:  # recorded below
                outcome["error"] = exc

        if watchdog:
            worker = threading.Thread(target=target, name="shardlint-collective", daemon=True)
            worker.start()
            worker.join(timeout_seconds)
            if worker.is_alive():
                self.report.add_note(f"rank {rank} was still waiting in {label} after "
                                     f"{time.monotonic() - started:.1f} s (the probe's watchdog, {timeout_seconds} s)")
                self.leave_at_once = True
                store.set(key, "1")
                return
        else:
            target()
        waited = time.monotonic() - started
        if "error" in outcome:
            self.report.set_exception(outcome["error"], "checks")
            self.report.add_note(f"rank {rank} waited {waited:.1f} s in {label} (collective timeout {timeout_seconds} s)")
        else:
            value = outcome.get("value")
            entries = f" {len(value)} entries" if hasattr(value, "__len__") else ""
            self.report.add_note(f"rank {rank} {label} returned{entries} after {waited:.1f} s")
        if ranks is not None:
            store.set(key, "1")
        else:
            dist.barrier()

    # ---- driving ----

    def run(self, replay: Callable[["ReplaySession"], None]) -> int:
        code = report_mod.EXIT_OK
        failed = False
        try:
            instrument.install(self.tracker)
        except Exception as exc:
            self.report.add_note(f"instrumentation not installed: {type(exc).__name__}: {exc}")
        try:
            replay(self)
        except compat.ProbeEnvironmentError as exc:
            self.report.set_probe_error(str(exc))
            print(f"shardlint probe: {exc}", file=sys.stderr)
            code, failed = report_mod.EXIT_PROBE_ERROR, True
        except Exception as exc:
            traceback.print_exc()
            phase = self.report.phase
            failed = True
            if phase in ("setup", "checks"):
                self.report.set_probe_error(
                    f"{phase}: {report_mod.exception_type_name(exc)}: {report_mod.exception_text(exc)}")
                code = report_mod.EXIT_PROBE_ERROR
            else:
                self.report.set_exception(exc, phase)
        try:
            path = self.report.write()  # fills in the environment first
            print(f"shardlint probe: rank {self.report.rank} report: {path}", file=sys.stderr)
        except Exception as exc:
            print(f"shardlint probe: could not write the rank report: {type(exc).__name__}: {exc}", file=sys.stderr)
            code, failed = report_mod.EXIT_NO_REPORT, True
        if failed or self.leave_at_once:
            # After a failure (or a call the watchdog gave up on) a collective may be half done: tearing
            # the process group down can hang, so leave at once (the report is written).
            instrument.flush_std_streams()
            os._exit(code)
        _destroy_process_group()
        return code


def main(replay: Callable[[ReplaySession], None], *, finding: Dict[str, Any], shape: str = "",
         wrap_api: str = "", optimizer: str = DEFAULT_OPTIMIZER) -> int:
    """Runs one replay on this rank; returns the exit code (or leaves with os._exit after a failure)."""
    return ReplaySession(finding, shape, wrap_api, optimizer).run(replay)
