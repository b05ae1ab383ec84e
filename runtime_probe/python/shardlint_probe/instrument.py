"""Instrumentation: records optimizer construction, add_param_group, fully_shard, FSDP1
construction and accelerate's prepare with their file:line, and (script mode) runs the checks at
the first optimizer step, writes the rank report and stops the process.

Nothing is imported from torch or accelerate here at import time. ``install`` puts a post-import
hook on sys.meta_path: each target is patched right after its module is first imported (or at
once when it already is), so a script that never imports torch runs untouched.

Patched (each wrapper records only the outermost call, so the add_param_group calls an
optimizer's own __init__ makes, or the fully_shard calls accelerate makes inside prepare, are not
separate events):

- torch.optim.Optimizer.__init__ and .add_param_group;
- the first optimizer step, through torch's global step hooks
  (torch.optim.optimizer.register_optimizer_step_pre_hook / _post_hook), which every optimizer
  subclass runs, unlike a patched Optimizer.step that subclasses override (script mode only);
- fully_shard as exported by torch.distributed.fsdp and torch.distributed._composable.fsdp;
- torch.distributed.fsdp.FullyShardedDataParallel.__init__;
- accelerate.Accelerator.prepare;
- accelerate.Accelerator.__init__ (script mode on a gloo run only, not recorded as an event): accelerate
  enables FSDP only on accelerators, so in CPU processes it keeps distributed_type MULTI_CPU and
  prepare() would wrap the model in DDP instead. Right after the constructor the probe switches the
  state to FSDP with the script's plugin, as accelerate does on GPUs (the replays do the same,
  replay_runtime.enable_accelerate_fsdp_on_cpu), and says so in the rank report.

Script mode (``activate_script_mode``, called by runtime_probe/python/sitecustomize.py when
SHARDLINT_PROBE_MODE=script): when the first optimizer.step() completes, the checks run, the
report is written to $SHARDLINT_PROBE_OUT/rank<R>.json, stdout and stderr are flushed and the
process ends with os._exit(0) (report.EXIT_OK). If the script raises first, the exception is
recorded (sys.excepthook) and the report is written right then with reached_step false; the script's
own exit status is kept. On SIGTERM (torch.distributed.run stopping the other ranks after one
failed, or a timeout) the report is written before the process ends.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import signal
import sys
import threading
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import report as report_mod

_PACKAGE_DIR = os.path.dirname(os.path.realpath(__file__))
_SITECUSTOMIZE = os.path.join(os.path.dirname(_PACKAGE_DIR), "sitecustomize.py")

# The phase an event kind starts.
_KIND_PHASE = {
    "optimizer_init": "optimizer",
    "add_param_group": "add_param_group",
    "fully_shard": "wrap",
    "fsdp1_init": "wrap",
    "accelerate_prepare": "prepare",
    "replace_params": "replace",
    "optimizer_step": "step",
}


# ---- where a call comes from --------------------------------------------------------------------

_library_prefixes: Optional[Tuple[str, ...]] = None
_classified: Dict[str, str] = {}


def _prefixes() -> Tuple[str, ...]:
    global _library_prefixes
    if _library_prefixes is None:
        import site
        import sysconfig

        found = set()
        paths = sysconfig.get_paths()
        for key in ("stdlib", "platstdlib", "purelib", "platlib"):
            if paths.get(key):
                found.add(paths[key])
        try:
            found.update(site.getsitepackages())
        except Exception:
            pass
        try:
            found.add(site.getusersitepackages())
        except Exception:
            pass
        _library_prefixes = tuple(sorted(os.path.realpath(p).rstrip(os.sep) + os.sep for p in found if p))
    return _library_prefixes


def _classify_file(filename: str) -> str:
    """'probe' (this package), 'library' (stdlib, site-packages, frozen) or 'user'."""
    kind = _classified.get(filename)
    if kind is not None:
        return kind
    if filename.startswith("<frozen"):
        kind = "library"
    elif filename.startswith("<"):
        kind = "user"  # python -c, exec'd strings
    else:
        real = os.path.realpath(filename)
        if real.startswith(_PACKAGE_DIR + os.sep) or real == _SITECUSTOMIZE:
            kind = "probe"
        elif (os.sep + "site-packages" + os.sep) in real or (os.sep + "dist-packages" + os.sep) in real:
            kind = "library"
        elif any(real.startswith(p) for p in _prefixes()):
            kind = "library"
        else:
            kind = "user"
    _classified[filename] = kind
    return kind


def caller_location(start: int = 2) -> Tuple[str, int]:
    """The innermost frame of user code (not this package, the stdlib or site-packages) on the stack.

    Falls back to the innermost frame outside this package. Paths are absolute.
    """
    try:
        frame = sys._getframe(start)
    except ValueError:
        return "", 0
    fallback: Optional[Tuple[str, int]] = None
    while frame is not None:
        filename = frame.f_code.co_filename
        kind = _classify_file(filename)
        if kind != "probe":
            where = (filename if filename.startswith("<") else os.path.abspath(filename), frame.f_lineno)
            if kind == "user":
                return where
            if fallback is None:
                fallback = where
        frame = frame.f_back
    return fallback or ("", 0)


# ---- what was seen ----------------------------------------------------------------------------


class Tracker:
    """Events, the parameters modules had before they were wrapped, and the wrapped modules."""

    def __init__(self, report: "report_mod.RankReport", record_exceptions: bool = False) -> None:
        self.report = report
        self.record_exceptions = record_exceptions
        self._before_wrap: Dict[int, Any] = {}   # id -> weakref (or None when not weak-referenceable)
        self._wrapped: List[Any] = []            # weakrefs, in wrap order

    @property
    def phase(self) -> str:
        return self.report.phase

    @phase.setter
    def phase(self, value: str) -> None:
        self.report.phase = value

    def record(self, kind: str) -> None:
        file, line = caller_location(1)  # frames of this package are skipped anyway
        self.report.add_event(kind, file, line)
        phase = _KIND_PHASE.get(kind)
        if phase:
            self.phase = phase

    def remember_parameters(self, obj: Any) -> None:
        """Remembers the parameters of a module (or a list of modules) about to be wrapped."""
        for module in _modules_in(obj):
            try:
                params = list(module.parameters())
            except Exception:
                continue
            for p in params:
                try:
                    self._before_wrap[id(p)] = weakref.ref(p)
                except TypeError:
                    self._before_wrap[id(p)] = None

    def was_parameter(self, t: Any) -> bool:
        """Whether `t` was a parameter of a module before a wrap (identity, not just id)."""
        if id(t) not in self._before_wrap:
            return False
        ref = self._before_wrap[id(t)]
        return ref is None or ref() is t

    def note_wrapped(self, obj: Any) -> None:
        for module in _modules_in(obj):
            try:
                self._wrapped.append(weakref.ref(module))
            except TypeError:
                pass

    def wrapped_modules(self) -> List[Any]:
        alive = []
        for ref in self._wrapped:
            m = ref()
            if m is not None and all(m is not x for x in alive):
                alive.append(m)
        return alive


def _modules_in(obj: Any) -> List[Any]:
    torch = sys.modules.get("torch")
    if torch is None:
        return []
    module_cls = torch.nn.Module
    if isinstance(obj, module_cls):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [m for m in obj if isinstance(m, module_cls)]
    return []


# ---- patching -----------------------------------------------------------------------------------

_tls = threading.local()
_tracker: Optional[Tracker] = None
_wrappers: Dict[int, Any] = {}  # id(original function) -> wrapper, so one wrapper serves every alias


def _depth() -> int:
    return getattr(_tls, "depth", 0)


def _recording_wrapper(kind: str, original: Callable, before: Optional[Callable] = None,
                       after: Optional[Callable] = None) -> Callable:
    """Wraps `original`: at depth 0, records `kind` with the caller's location and calls
    before(args, kwargs) / after(args, kwargs, result); nested calls pass straight through."""
    if getattr(original, "__shardlint_probe__", False):
        return original
    known = _wrappers.get(id(original))
    if known is not None:
        return known

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        tracker = _tracker
        outer = tracker is not None and _depth() == 0
        if outer:
            try:
                tracker.record(kind)
                if before is not None:
                    before(tracker, args, kwargs)
            except Exception as exc:  # never break the user's call
                tracker.report.add_note(f"instrumentation of {kind} failed: {type(exc).__name__}: {exc}")
        _tls.depth = _depth() + 1
        try:
            result = original(*args, **kwargs)
        except Exception as exc:
            if outer and tracker.record_exceptions and kind in ("fully_shard", "fsdp1_init", "accelerate_prepare"):
                tracker.report.set_exception(exc, _KIND_PHASE[kind])
            raise
        finally:
            _tls.depth = _depth() - 1
        if outer and after is not None:
            try:
                after(tracker, args, kwargs, result)
            except Exception as exc:
                tracker.report.add_note(f"instrumentation of {kind} failed: {type(exc).__name__}: {exc}")
        return result

    wrapper.__shardlint_probe__ = True  # type: ignore[attr-defined]
    _wrappers[id(original)] = wrapper
    return wrapper


def _fully_shard_before(tracker: Tracker, args: tuple, kwargs: dict) -> None:
    tracker.remember_parameters(args[0] if args else kwargs.get("module"))


def _fully_shard_after(tracker: Tracker, args: tuple, kwargs: dict, result: Any) -> None:
    tracker.note_wrapped(args[0] if args else kwargs.get("module"))


def _fsdp1_before(tracker: Tracker, args: tuple, kwargs: dict) -> None:
    tracker.remember_parameters(args[1] if len(args) > 1 else kwargs.get("module"))


def _fsdp1_after(tracker: Tracker, args: tuple, kwargs: dict, result: Any) -> None:
    tracker.note_wrapped(args[0])  # the FSDP instance itself


def _prepare_before(tracker: Tracker, args: tuple, kwargs: dict) -> None:
    for obj in args[1:]:
        tracker.remember_parameters(obj)


def _prepare_after(tracker: Tracker, args: tuple, kwargs: dict, result: Any) -> None:
    results = result if isinstance(result, (tuple, list)) else (result,)
    for obj in results:
        tracker.note_wrapped(obj)


def _patch_attr(owner: Any, name: str, kind: str, before=None, after=None) -> bool:
    original = getattr(owner, name, None)
    if original is None or not callable(original) or isinstance(original, type(sys)):
        return False
    wrapped = _recording_wrapper(kind, original, before, after)
    if wrapped is not original:
        setattr(owner, name, wrapped)
    return True


def _patch_optimizer(module: Any) -> None:
    optimizer_cls = getattr(module, "Optimizer", None)
    if optimizer_cls is None:
        return
    _patch_attr(optimizer_cls, "__init__", "optimizer_init")
    _patch_attr(optimizer_cls, "add_param_group", "add_param_group")
    if _step_hooks_wanted:
        _register_step_hooks()


def _patch_fully_shard_module(module: Any) -> None:
    _patch_attr(module, "fully_shard", "fully_shard", _fully_shard_before, _fully_shard_after)


def _patch_fsdp(module: Any) -> None:
    _patch_fully_shard_module(module)
    fsdp_cls = getattr(module, "FullyShardedDataParallel", None)
    if fsdp_cls is not None:
        _patch_attr(fsdp_cls, "__init__", "fsdp1_init", _fsdp1_before, _fsdp1_after)


def _patch_accelerate(module: Any) -> None:
    accelerator_cls = getattr(module, "Accelerator", None)
    if accelerator_cls is not None:
        _patch_attr(accelerator_cls, "prepare", "accelerate_prepare", _prepare_before, _prepare_after)
        init = getattr(accelerator_cls, "__init__", None)
        if init is not None and not getattr(init, "__shardlint_probe__", False):
            accelerator_cls.__init__ = _accelerator_init_wrapper(init)


def _accelerator_init_wrapper(original: Callable) -> Callable:
    """Accelerator.__init__, then (script mode, gloo run) the switch to FSDP that accelerate makes
    only on accelerators; see _enable_accelerate_fsdp_on_cpu."""

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if _script.active and _script.cpu_fsdp and _depth() == 0 and os.getpid() == _script.pid:
            try:
                _enable_accelerate_fsdp_on_cpu(self, original, args, kwargs)
            except Exception as exc:  # never break the user's call
                _script.report.add_note(f"switching accelerate to FSDP on CPU failed: {type(exc).__name__}: {exc}")

    __init__.__shardlint_probe__ = True  # type: ignore[attr-defined]
    return __init__


def _enable_accelerate_fsdp_on_cpu(accelerator: Any, init: Callable, args: tuple, kwargs: dict) -> None:
    """The script's FSDP plugin (the constructor's `fsdp_plugin`, else the one accelerate makes from
    the environment when ACCELERATE_USE_FSDP=true, e.g. under `accelerate launch` with an FSDP
    config); with it the state becomes FSDP, as replay_runtime.enable_accelerate_fsdp_on_cpu does
    for replays, and the mixed precision goes to the plugin as accelerate does when it enables FSDP."""
    import inspect

    try:
        bound = inspect.signature(init).bind(accelerator, *args, **kwargs)
        plugin = bound.arguments.get("fsdp_plugin")
    except TypeError:
        plugin = kwargs.get("fsdp_plugin")
    if plugin is None and os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true":
        from accelerate.utils import FullyShardedDataParallelPlugin

        plugin = FullyShardedDataParallelPlugin()
    if plugin is None:
        return
    from .replay_runtime import enable_accelerate_fsdp_on_cpu

    note = enable_accelerate_fsdp_on_cpu(accelerator, plugin)
    if not note:
        return
    precision = getattr(accelerator.state, "_mixed_precision", "no")
    if precision and precision != "no" and hasattr(plugin, "set_mixed_precision"):
        plugin.set_mixed_precision(precision)
        note += f" (mixed precision {precision} set on the plugin, as accelerate does)"
    _script.report.add_note("script mode on gloo/CPU: " + note)


_TARGETS: Dict[str, Callable[[Any], None]] = {
    "torch.optim": _patch_optimizer,
    "torch.distributed.fsdp": _patch_fsdp,
    "torch.distributed._composable.fsdp": _patch_fully_shard_module,
    "torch.distributed._composable.fsdp.fully_shard": _patch_fully_shard_module,
    "torch.distributed.fsdp._fully_shard._fully_shard": _patch_fully_shard_module,
    "accelerate.accelerator": _patch_accelerate,
}


class _PostImportFinder:
    """A meta path finder that runs a callback right after a target module is executed."""

    def __init__(self, callbacks: Dict[str, Callable[[Any], None]]) -> None:
        self.callbacks = dict(callbacks)
        self._busy: set = set()

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.callbacks or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self:
                    continue
                find = getattr(finder, "find_spec", None)
                if find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self._busy.discard(fullname)
        loader = getattr(spec, "loader", None) if spec is not None else None
        original_exec = getattr(loader, "exec_module", None)
        if original_exec is None:
            return None
        callbacks = self.callbacks

        def exec_module(module, _original=original_exec, _name=fullname):
            if getattr(module, "__name__", None) != _name:  # a loader shared with other modules
                return _original(module)
            try:
                del loader.exec_module  # back to the loader's own method for any later use
            except AttributeError:
                pass
            _original(module)
            callback = callbacks.pop(_name, None)
            if callback is not None:
                _run_callback(callback, module)

        try:
            loader.exec_module = exec_module  # an attribute of this module's own loader instance
        except Exception:
            return None
        return spec

    def invalidate_caches(self) -> None:
        pass


def _run_callback(callback: Callable[[Any], None], module: Any) -> None:
    try:
        callback(module)
    except Exception as exc:
        if _tracker is not None:
            _tracker.report.add_note(f"instrumentation of {getattr(module, '__name__', '?')} failed: "
                                     f"{type(exc).__name__}: {exc}")


_finder: Optional[_PostImportFinder] = None
_step_hooks_wanted = False
_step_hooks_registered = False


def install(tracker: Tracker, step_hooks: bool = False) -> None:
    """Records into `tracker` from now on; patches what is imported and hooks the rest."""
    global _tracker, _finder, _step_hooks_wanted
    _tracker = tracker
    _step_hooks_wanted = _step_hooks_wanted or step_hooks
    if _finder is None:
        _finder = _PostImportFinder(_TARGETS)
        sys.meta_path.insert(0, _finder)
    for name in list(_finder.callbacks):
        module = sys.modules.get(name)
        if module is not None:
            callback = _finder.callbacks.pop(name)
            _run_callback(callback, module)
    if _step_hooks_wanted and "torch.optim" in sys.modules:
        _register_step_hooks()


def _register_step_hooks() -> None:
    global _step_hooks_registered
    if _step_hooks_registered:
        return
    optimizer_module = sys.modules.get("torch.optim.optimizer")
    pre = getattr(optimizer_module, "register_optimizer_step_pre_hook", None)
    post = getattr(optimizer_module, "register_optimizer_step_post_hook", None)
    if pre is None or post is None:
        if _tracker is not None:
            _tracker.report.set_probe_error("this torch has no global optimizer step hooks (torch >= 2.0 needed)")
        return
    pre(_script.pre_step)
    post(_script.post_step)
    _step_hooks_registered = True


# ---- script mode --------------------------------------------------------------------------------


def find_model(tracker: Tracker, optimizer: Any) -> Any:
    """The model the optimizer trains: the topmost module above the wrapped modules.

    fully_shard on blocks alone leaves the root unwrapped, so the root is found by walking up
    parent links built from every live nn.Module (gc). With several roots, the one holding the
    most optimizer entries wins (ties: the one wrapped last).
    """
    wrapped = tracker.wrapped_modules()
    if not wrapped:
        return None
    import gc

    import torch

    module_cls = torch.nn.Module
    parent: Dict[int, Any] = {}
    for obj in gc.get_objects():
        try:
            if not issubclass(type(obj), module_cls):  # type(): no attribute access on odd objects
                continue
            children = obj.__dict__.get("_modules") or {}
        except Exception:
            continue
        for child in children.values():
            if child is not None:
                parent.setdefault(id(child), obj)
    roots: List[Any] = []
    for m in wrapped:
        r, hops = m, 0
        while id(r) in parent and hops < 10000:
            r, hops = parent[id(r)], hops + 1
        if all(r is not x for x in roots):
            roots.append(r)
    if len(roots) == 1:
        return roots[0]
    from .checks import optimizer_tensors

    entries = {id(t) for t in optimizer_tensors(optimizer)}

    def score(root: Any) -> int:
        return sum(1 for p in root.parameters() if id(p) in entries)

    return max(reversed(roots), key=score)


def _finding_from_env() -> Tuple[str, str, int]:
    raw = os.environ.get("SHARDLINT_PROBE_FINDING", "")
    if not raw:
        return "", "", 0
    try:
        data = json.loads(raw)
        return str(data.get("code", "")), str(data.get("path", "")), int(data.get("line", 0))
    except Exception:
        return "", "", 0


class _ScriptController:
    def __init__(self) -> None:
        self.active = False
        self.pid = 0
        self.report: Optional[report_mod.RankReport] = None
        self.tracker: Optional[Tracker] = None
        self.probe: Any = None
        self.done = False
        self.written = False
        self.cpu_fsdp = False  # gloo run: accelerate's FSDP is switched on in CPU processes

    def start(self) -> None:
        self.active = True
        self.pid = os.getpid()
        self.cpu_fsdp = os.environ.get("SHARDLINT_PROBE_BACKEND") == "gloo"
        self.report = report_mod.RankReport(mode="script")
        self.report.set_finding(*_finding_from_env())
        self.tracker = Tracker(self.report, record_exceptions=True)
        install(self.tracker, step_hooks=True)
        self._previous_excepthook = sys.excepthook
        sys.excepthook = self.excepthook
        atexit.register(self.at_exit)
        if threading.current_thread() is threading.main_thread():
            try:
                if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
                    signal.signal(signal.SIGTERM, self.on_sigterm)
            except (ValueError, OSError):
                pass

    # ---- the first step ----

    def pre_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self.active or self.probe is not None or self.done or os.getpid() != self.pid:
            return None
        from . import checks

        tracker, report = self.tracker, self.report
        tracker.record("optimizer_step")
        model = None
        try:
            model = find_model(tracker, optimizer)
        except Exception as exc:
            report.add_note(f"finding the wrapped model failed: {type(exc).__name__}: {exc}")
        self.probe = checks.FirstStepProbe(model, optimizer, report, tracker.was_parameter)
        try:
            self.probe.before()
        except Exception as exc:
            report.set_probe_error(f"checks before the first step failed: {type(exc).__name__}: {exc}")
        tracker.phase = "step"
        return None

    def post_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self.active or self.probe is None or self.done or os.getpid() != self.pid:
            return
        if optimizer is not self.probe.optimizer:
            return
        self.done = True
        report = self.report
        report.reached_step = True
        report.phase = "checks"
        try:
            self.probe.after()
        except Exception as exc:
            report.set_probe_error(f"checks after the first step failed: {type(exc).__name__}: {exc}")
        code = report_mod.EXIT_OK if self.write() else report_mod.EXIT_NO_REPORT
        flush_std_streams()
        os._exit(code)

    # ---- the other ways out ----

    def write(self) -> bool:
        if self.written or self.report is None or os.getpid() != self.pid:
            return self.written
        try:
            path = self.report.write()  # fills in the environment first
            self.written = True
            print(f"shardlint probe: rank {self.report.rank} report: {path}", file=sys.stderr)
        except Exception as exc:
            print(f"shardlint probe: could not write the rank report: {type(exc).__name__}: {exc}", file=sys.stderr)
        return self.written

    def excepthook(self, exc_type, exc, tb) -> None:
        if self.report is not None and isinstance(exc, Exception):
            self.report.set_exception(exc, self.report.phase)
        self._previous_excepthook(exc_type, exc, tb)
        # The script is over: write now, not at exit. Between here and the atexit hooks the
        # interpreter tears down (other exit hooks, a process group whose peer died), and a rank
        # that is killed or crashes there would leave no report at all.
        self.at_exit()

    def at_exit(self) -> None:
        if self.active and not self.done and not self.written and os.getpid() == self.pid:
            if not self.report.exception_type:
                self.report.add_note("the script ended before its first optimizer.step() completed")
            self.write()

    def on_sigterm(self, signum, frame) -> None:
        if self.active and not self.done and os.getpid() == self.pid:
            self.report.add_note("terminated by SIGTERM before the first optimizer.step() completed "
                                 "(another rank failed, or the probe's timeout)")
            self.write()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


_script = _ScriptController()

_ACTIVE_PID_ENV = "SHARDLINT_PROBE_ACTIVE_PID"


def script_mode_applies(environ: Optional[Dict[str, str]] = None) -> Tuple[bool, str]:
    """Whether this process is a rank the script mode instruments, and why not.

    Only worker processes started by torch.distributed.run (RANK and LOCAL_RANK set) are
    instrumented, not the launcher itself; and only the first Python process of a rank: a
    process it starts (a spawned DataLoader worker, a subprocess) inherits
    SHARDLINT_PROBE_ACTIVE_PID and stays untouched.
    """
    env = os.environ if environ is None else environ
    if env.get("SHARDLINT_PROBE_MODE") != "script":
        return False, "SHARDLINT_PROBE_MODE is not 'script'"
    if "RANK" not in env or "LOCAL_RANK" not in env:
        return False, "not a torch.distributed.run worker (RANK/LOCAL_RANK unset)"
    if env.get(_ACTIVE_PID_ENV):
        return False, "a child of an instrumented rank"
    return True, ""


def activate_script_mode() -> bool:
    """Called from sitecustomize at interpreter start-up; True when instrumentation is on."""
    applies, _ = script_mode_applies()
    if not applies or _script.active:
        return False
    os.environ[_ACTIVE_PID_ENV] = str(os.getpid())
    _script.start()
    return True


def flush_std_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
