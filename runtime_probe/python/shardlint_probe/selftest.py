"""The CPU self-test: what trains one step on two gloo ranks on CPU with the installed torch.

Run by the orchestrator (`probeCpuFsdp` in runtime_probe/orchestrator/ProbeEnvironment.cpp) before it
picks a backend: two processes started with torch.multiprocessing over a FileStore (no port), each
running one forward, backward and optimizer.step() with

- ``fsdp2``: FSDP2 ``fully_shard`` on a CPU DeviceMesh;
- ``fsdp1_orig`` / ``fsdp1_flat``: FSDP1 ``FullyShardedDataParallel`` with ``use_orig_params=True`` /
  ``False`` and ``device_id=torch.device("cpu")`` (without it torch 2.6+ asks for an accelerator);
- ``accelerate_fsdp2`` / ``accelerate_fsdp1``: accelerate's ``prepare`` with
  ``FullyShardedDataParallelPlugin(fsdp_version=2 / 1)`` (accelerate leaves CPU processes at
  MULTI_CPU; the replay's helper switches the state to FSDP, as replays do);
- ``fabric``: Lightning Fabric's ``FSDPStrategy`` (through the replay's CPU subclass).

It prints one JSON line: each key is ``true``, the first line of the error it raised, or
``"not installed: ..."``. Only torch is needed; accelerate and Lightning are tried when importable.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from typing import Any, Callable, Dict

CHECKS = ("fsdp2", "fsdp1_orig", "fsdp1_flat", "accelerate_fsdp2", "accelerate_fsdp1", "fabric")


def _error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _tiny(torch: Any) -> Any:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))


def _step(torch: Any, model: Any, optimizer: Any, backward: Callable[[Any], None] = None) -> None:
    loss = model(torch.randn(4, 8)).sum()
    (backward or (lambda l: l.backward()))(loss)
    optimizer.step()


def _fsdp2(torch: Any, world: int) -> None:
    from torch.distributed.device_mesh import init_device_mesh

    from . import compat

    fully_shard = compat.fully_shard_function()
    model = _tiny(torch)
    mesh = init_device_mesh("cpu", (world,))
    for layer in model:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    _step(torch, model, torch.optim.AdamW(model.parameters(), lr=0.1))


def _fsdp1(torch: Any, use_orig_params: bool) -> None:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    model = FSDP(_tiny(torch), use_orig_params=use_orig_params, device_id=torch.device("cpu"))
    _step(torch, model, torch.optim.AdamW(model.parameters(), lr=0.1))


def _accelerate(torch: Any, version: int, notes: list) -> None:
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState
    from accelerate.utils import FullyShardedDataParallelPlugin

    from . import replay_runtime as rt

    AcceleratorState._reset_state(True)
    plugin = FullyShardedDataParallelPlugin(**rt.fsdp_version_kwargs(version))
    accelerator = Accelerator(cpu=True, fsdp_plugin=plugin)
    note = rt.enable_accelerate_fsdp_on_cpu(accelerator, plugin)
    if note:
        notes.append(note)
    model = _tiny(torch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    _step(torch, model, optimizer, accelerator.backward)


def _fabric(torch: Any, rank: int, world: int) -> None:
    from . import replay_runtime as rt

    env = rt.DistEnv(rank, world, rank, "gloo", torch.device("cpu"))
    fabric_cls, _ = rt._fabric_modules()
    fabric = fabric_cls(strategy=rt.fabric_fsdp_strategy(env, use_orig_params=True), **rt.fabric_device_kwargs(env))
    fabric.launch()
    model = fabric.setup_module(_tiny(torch))
    optimizer = fabric.setup_optimizers(torch.optim.AdamW(model.parameters(), lr=0.1))
    _step(torch, model, optimizer, fabric.backward)


def _work(rank: int, world: int, store: str, out_dir: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                       "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1"})
    result: Dict[str, Any] = {}
    notes: list = []
    try:
        dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    except BaseException as exc:
        result["init"] = _error(exc)
    else:
        checks = {
            "fsdp2": lambda: _fsdp2(torch, world),
            "fsdp1_orig": lambda: _fsdp1(torch, True),
            "fsdp1_flat": lambda: _fsdp1(torch, False),
            "accelerate_fsdp2": lambda: _accelerate(torch, 2, notes),
            "accelerate_fsdp1": lambda: _accelerate(torch, 1, notes),
            "fabric": lambda: _fabric(torch, rank, world),
        }
        needs = {"accelerate_fsdp2": "accelerate", "accelerate_fsdp1": "accelerate", "fabric": "lightning"}
        for name, check in checks.items():
            module = needs.get(name)
            if module:
                try:
                    __import__(module)
                except BaseException as exc:
                    result[name] = f"not installed: {_error(exc)}"
                    continue
            try:
                check()
                result[name] = True
            except BaseException as exc:
                result[name] = _error(exc)
            try:
                dist.barrier()  # the next check starts together on both ranks
            except BaseException as exc:
                result.setdefault("init", f"barrier after {name}: {_error(exc)}")
                break
    result["notes"] = sorted(set(notes))
    with open(os.path.join(out_dir, f"{rank}.json"), "w") as f:
        json.dump(result, f)
    # Leave without tearing down: a failed check may have left a collective half done.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main() -> int:
    import torch.multiprocessing as mp

    world = 2
    tmp = tempfile.mkdtemp(prefix="shardlint-cpu-selftest-")
    try:
        mp.spawn(_work, args=(world, os.path.join(tmp, "store"), tmp), nprocs=world, join=True)
        out: Dict[str, Any] = {}
        reports = []
        for rank in range(world):
            path = os.path.join(tmp, f"{rank}.json")
            reports.append(json.load(open(path)) if os.path.exists(path) else {"init": f"rank {rank} wrote nothing"})
        for name in CHECKS:
            values = [r.get(name, r.get("init", "not run")) for r in reports]
            bad = [v for v in values if v is not True]
            out[name] = True if not bad else bad[0]
        out["notes"] = sorted({n for r in reports for n in r.get("notes", [])})
        # The names the orchestrator read before the FSDP1 variants were split.
        out["fsdp1"] = out["fsdp1_orig"]
        print(json.dumps(out))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
