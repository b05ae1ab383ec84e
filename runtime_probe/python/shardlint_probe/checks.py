"""The checks run at the first optimizer step (replay and script mode).

- stale entries: optimizer tensors that are not among the wrapped model's current parameters
  but were parameters of a module before it was wrapped (SL101);
- unmanaged entries: optimizer tensors no FSDP unit manages while the model is wrapped: plain
  tensors among DTensors (FSDP2), tensors that are neither a FlatParameter nor an original
  parameter FSDP1 keeps (use_orig_params=True), and free tensors that were never a parameter
  of the model (SL102, SL103);
- trainable parameters the optimizer does not hold: the model's parameters with requires_grad that are
  in no param group, so no step updates them (SL105: PEFT adapters added, or every parameter replaced
  by to_empty / load_state_dict(assign=True), after the optimizer was built);
- params_changed: whether the step changed the model's (local) parameters at all;
- diverged: with 2 or more ranks, checksums of the parameters outside FSDP, all-gathered after a
  step on different data on every rank.

torch is imported lazily, inside the functions.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import compat


def unwrap_optimizer(optimizer: Any) -> Any:
    """The torch optimizer inside a wrapper such as accelerate's AcceleratedOptimizer."""
    inner = getattr(optimizer, "optimizer", None)
    if inner is not None and hasattr(inner, "param_groups"):
        return inner
    return optimizer


def optimizer_tensors(optimizer: Any) -> List[Any]:
    """Every tensor in the optimizer's param groups, in order (duplicates kept once)."""
    seen = set()
    out = []
    for group in getattr(unwrap_optimizer(optimizer), "param_groups", None) or []:
        params = group.get("params", []) if isinstance(group, dict) else []
        for t in params:
            if id(t) not in seen:
                seen.add(id(t))
                out.append(t)
    return out


def optimizer_class_name(optimizer: Any) -> str:
    cls = type(unwrap_optimizer(optimizer))
    return f"{cls.__module__}.{cls.__qualname__}"


class Classification:
    def __init__(self) -> None:
        self.entries = 0
        self.stale = 0
        self.unmanaged = 0
        self.unmanaged_names: List[str] = []
        self.wrapped = ""           # "fsdp2", "fsdp1", "fsdp1+fsdp2" or "" (no FSDP seen)
        self.outside: List[Any] = []  # tensors outside every FSDP unit that the optimizer updates
        self.trainable = 0          # the model's parameters with requires_grad
        self.trainable_not_optimized = 0  # ... that are in no param group of the optimizer
        self.trainable_not_optimized_names: List[str] = []
        self.notes: List[str] = []


def _describe(t: Any) -> str:
    shape = tuple(getattr(t, "shape", ()))
    return f"<tensor not in the model, shape {list(shape)}>"


def classify(model: Any, optimizer: Any, was_parameter: Optional[Callable[[Any], bool]] = None) -> Classification:
    """Sorts the optimizer's tensors into current/managed, stale, and unmanaged.

    `was_parameter(t)`: whether `t` was a parameter of a module before that module was wrapped
    (from the instrumentation). None: every entry that is not a current parameter counts as stale.
    """
    result = Classification()
    entries = optimizer_tensors(optimizer)
    result.entries = len(entries)
    if model is None:
        result.notes.append("the wrapped model was not found: stale and unmanaged entries were not counted")
        return result

    names: Dict[int, str] = {}
    current: Dict[int, Any] = {}
    for name, p in model.named_parameters():  # shared parameters once
        current[id(p)] = p
        names[id(p)] = name

    dtensor = compat.dtensor_class()
    flat_cls = compat.flat_parameter_class()
    fsdp1 = compat.fsdp1_class()
    fsdp2_module = compat.fsdp2_module_class()

    modules = list(model.modules())
    has_fsdp2 = (fsdp2_module is not None and any(isinstance(m, fsdp2_module) for m in modules)) or (
        dtensor is not None and any(isinstance(p, dtensor) for p in current.values())
    )
    fsdp1_units = [m for m in modules if fsdp1 is not None and isinstance(m, fsdp1)]
    result.wrapped = "+".join(k for k, on in (("fsdp1", bool(fsdp1_units)), ("fsdp2", has_fsdp2)) if on)

    # Tensors FSDP1 manages: each unit's FlatParameter and, with use_orig_params=True, the
    # original parameters (and shared ones) it keeps.
    fsdp1_managed = set()
    for unit in fsdp1_units:
        flat = getattr(unit, "_flat_param", None)
        if flat is None:
            handle = getattr(unit, "_handle", None)
            flat = getattr(handle, "flat_param", None) if handle is not None else None
        if flat is None:
            continue
        fsdp1_managed.add(id(flat))
        for attr in ("_params", "_shared_params"):
            for p in getattr(flat, attr, None) or []:
                fsdp1_managed.add(id(p))

    def managed(t: Any) -> bool:
        if has_fsdp2 and dtensor is not None and isinstance(t, dtensor):
            return True
        if flat_cls is not None and isinstance(t, flat_cls):
            return True
        return id(t) in fsdp1_managed

    for t in entries:
        if id(t) in current:
            if result.wrapped and not managed(t):
                result.unmanaged += 1
                result.unmanaged_names.append(names.get(id(t), _describe(t)))
                result.outside.append(t)
            continue
        stale = was_parameter(t) if was_parameter is not None else True
        if stale:
            result.stale += 1
        elif result.wrapped:
            # A tensor that never was a parameter of the model: a free nn.Parameter, a plain tensor.
            result.unmanaged += 1
            result.unmanaged_names.append(_describe(t))
            result.outside.append(t)
        else:
            result.outside.append(t)
    # The model's trainable parameters the optimizer does not hold: no step ever updates them.
    held = {id(t) for t in entries}
    for pid, p in current.items():
        if getattr(p, "requires_grad", False):
            result.trainable += 1
            if pid not in held:
                result.trainable_not_optimized += 1
                result.trainable_not_optimized_names.append(names.get(pid, "?"))
    # Parameters of the model outside FSDP that the optimizer does not hold cannot diverge by its step.
    if not result.wrapped:
        result.notes.append("no FSDP wrapping was seen on the model: unmanaged entries were not counted")
    return result


def local_tensor(t: Any) -> Any:
    """The rank-local data of a parameter: a DTensor's local shard, or the tensor itself."""
    to_local = getattr(t, "to_local", None)
    if callable(to_local):
        try:
            return to_local()
        except Exception:
            pass
    return t


def has_storage(data: Any) -> bool:
    """Whether the tensor's storage holds its elements. FSDP2 frees the storage of an unsharded
    parameter when it reshards (the storage is resized to 0 bytes): an optimizer that took the
    unsharded parameters (a forward before the optimizer was built, SL104) still holds such tensors,
    and reading them would read freed memory."""
    try:
        storage = data.untyped_storage()
        needed = (data.storage_offset() + max((s - 1) * st for s, st in zip(data.shape, data.stride())) + 1
                  if data.numel() > 0 else 0)
        return storage.nbytes() >= needed * data.element_size()
    except Exception:
        return True  # no storage to ask (a tensor subclass): read it as before


def checksum(tensors: Sequence[Any]) -> Tuple[float, float]:
    """(sum, sum of squares) in float64 of the local data of `tensors` (tensors whose storage was
    freed are left out)."""
    import torch

    total, squares = 0.0, 0.0
    with torch.no_grad():
        for t in tensors:
            data = local_tensor(t).detach()
            # A meta tensor has no values (an optimizer built before to_empty, SL105); a resharded one's storage is freed.
            if data.numel() == 0 or data.is_meta or not has_storage(data):
                continue
            d = data.double()
            total += float(d.sum().item())
            squares += float((d * d).sum().item())
    return total, squares


def per_tensor_checksums(tensors: Sequence[Any]) -> List[Tuple[float, float]]:
    return [checksum([t]) for t in tensors]


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _collective_device(torch: Any, dist: Any) -> Any:
    backend = str(dist.get_backend()).lower()
    if "nccl" in backend and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_gather_floats(values: Sequence[float]) -> Optional[List[List[float]]]:
    """Every rank's `values` (same length on all ranks); None without a process group of 2+ ranks."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return None
    device = _collective_device(torch, dist)
    mine = torch.tensor([float(v) for v in values], dtype=torch.float64, device=device)
    gathered = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, mine)
    return [[float(x) for x in g.cpu().tolist()] for g in gathered]


class FirstStepProbe:
    """Call ``before()`` right before the first optimizer.step() and ``after()`` right after it.

    ``before`` classifies the optimizer's entries (so the counts are reported even when the step
    raises) and takes checksums; ``after`` decides params_changed and diverged. Results go into
    `report` (a RankReport).
    """

    def __init__(self, model: Any, optimizer: Any, report: Any,
                 was_parameter: Optional[Callable[[Any], bool]] = None) -> None:
        self.model = model
        self.optimizer = optimizer
        self.report = report
        self.was_parameter = was_parameter
        self.classification: Optional[Classification] = None
        self._watched: List[Any] = []
        self._before: List[Tuple[float, float]] = []
        self._outside_before: Tuple[float, float] = (0.0, 0.0)
        self._outside_grads: Tuple[float, float, float] = (0.0, 0.0, 0.0)

    def before(self) -> None:
        report = self.report
        c = classify(self.model, self.optimizer, self.was_parameter)
        self.classification = c
        report.optimizer_entries = c.entries
        report.stale_optimizer_entries = c.stale
        report.unmanaged_entries = c.unmanaged
        report.unmanaged_names = list(c.unmanaged_names)
        if self.model is not None:
            report.trainable_params = c.trainable
            report.trainable_not_optimized = c.trainable_not_optimized
            report.trainable_not_optimized_names = list(c.trainable_not_optimized_names)
        report.optimizer_class = report.optimizer_class or optimizer_class_name(self.optimizer)
        for note in c.notes:
            report.add_note(note)
        # What the step should change: the model's current parameters (local shards); without a
        # model, the optimizer's own tensors.
        if self.model is not None:
            self._watched = list(self.model.parameters())
        else:
            self._watched = optimizer_tensors(self.optimizer)
        self._before = per_tensor_checksums(self._watched)
        self._outside_before = checksum(c.outside)
        # Gradients of the tensors outside FSDP, as the step will apply them: nothing reduces them,
        # so they differ across ranks that saw different data (unless the user reduced them).
        # Adam's first update is close to lr * sign(grad) and can hide that in the parameters.
        grads = [t.grad for t in c.outside if getattr(t, "grad", None) is not None]
        self._outside_grads = checksum(grads) + (float(len(grads)),)

    def after(self) -> None:
        report = self.report
        c = self.classification
        if c is None:
            raise RuntimeError("FirstStepProbe.after() without before()")
        after = per_tensor_checksums(self._watched)
        changed_local = any(not (_same(a[0], b[0]) and _same(a[1], b[1])) for a, b in zip(self._before, after))
        outside_after = checksum(c.outside)
        values = [1.0 if changed_local else 0.0, float(len(c.outside)),
                  self._outside_before[0], self._outside_before[1], outside_after[0], outside_after[1],
                  self._outside_grads[0], self._outside_grads[1], self._outside_grads[2]]
        try:
            gathered = all_gather_floats(values)
        except Exception as exc:
            gathered = None
            report.add_note(f"all_gather of the checksums failed ({type(exc).__name__}: {exc}): "
                            "params_changed is this rank's, divergence unknown")
        if gathered is None:
            report.params_changed = changed_local
            if report.world_size >= 2:
                report.add_note("no process group of 2 or more ranks: divergence was not checked")
            report.diverged = None
            return
        # A rank's shard can be empty (small parameters, many ranks): the step changed the
        # parameters when it changed them on any rank.
        report.params_changed = any(row[0] != 0.0 for row in gathered)
        if all(row[1] == 0.0 for row in gathered):
            report.diverged = None
            report.add_note("no optimized parameter is outside FSDP: divergence does not apply")
            return

        def agree(first: int, last: int) -> bool:
            return all(_same(row[k], gathered[0][k]) for row in gathered for k in range(first, last + 1))

        if not agree(2, 3):
            report.diverged = None
            report.add_note("the parameters outside FSDP already differed across ranks before the first step "
                            "(initialised differently on each rank?): divergence by the step is not measurable")
            return
        params_differ = not agree(4, 5)
        grads_differ = not agree(6, 8)
        if params_differ:
            report.add_note("after the first step, the parameters outside FSDP differ across ranks")
        if grads_differ:
            report.add_note("at the first step, the gradients of the parameters outside FSDP differ across ranks "
                            "(they are never reduced)")
        report.diverged = params_differ or grads_differ
