"""Run one generated program eagerly and through ember, and compare.

A program (see gen.py) defines ``f(x, y, lst, d, obj)``. Each *run* execs the
module text afresh (so globals such as ``SINK`` and ``LOG`` start empty), makes
fresh inputs, and calls ``f`` twice with different input values (same shapes,
different list/dict contents), the second call exercising ember's cache and
guards. After each call it records a snapshot:

* the result: tensors by value, dtype, shape, requires_grad, and an aliasing
  label (which input, or which earlier output, shares its storage); other
  values by ``==``; an exception by type and message;
* the inputs after the call (tensor values and shape/stride, list, dict, the
  object's attributes);
* the Python side effects (text printed to ``SINK``, the global ``LOG``);
* in grad mode, the gradients of a loss over the outputs and the mutated inputs.

``check_program`` compares ember (backend "eager" and "aot_eager", inference
and grad) against eager. It runs ember strict first: an internal error there
counts as a crash, and the program is then run non-strict, which must fall back
to an answer equal to eager's.
"""
from __future__ import annotations

import contextlib
import io
import linecache
import math
import os
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

import ember

EMBER_DIR = os.path.dirname(os.path.abspath(ember.__file__))
CONFIGS = [("eager", False), ("aot_eager", False), ("eager", True), ("aot_eager", True)]


# ----------------------------------------------------------------- inputs
# EMBER_FUZZ_VARY=1: three calls, x with 3, 5 and 6 rows (the second call recompiles with a
# symbolic dimension, the third reuses it: automatic dynamic shapes).
VARY = os.environ.get("EMBER_FUZZ_VARY", "") not in ("", "0")
_ROWS = (3, 5, 6)


def make_inputs(call: int, grad: bool, ns: dict):
    g = torch.Generator().manual_seed(1234 + call)
    x_leaf = (torch.rand(_ROWS[call] if VARY else 3, 4, generator=g, dtype=torch.float64) * 4 - 2)
    y_leaf = (torch.rand(4, generator=g, dtype=torch.float64) * 4 - 2)
    leaves = []
    if grad:
        # INPUT_MODE (gen_extra.py): 0 both non-leaf (the program may mutate them in place);
        # 1 y does not require grad; 2 x is a leaf that requires grad; 3 x does not require grad
        mode = ns.get("INPUT_MODE", 0)
        x_leaf.requires_grad_(mode != 3)
        y_leaf.requires_grad_(mode != 1)
        leaves = [t for t in (x_leaf, y_leaf) if t.requires_grad]
        x = x_leaf if mode in (2, 3) else x_leaf * 1
        y = y_leaf if mode == 1 else y_leaf * 1
    else:
        x, y = x_leaf, y_leaf
    lst = [1, 2, 3] if call == 0 else [4, 5]
    d = {"a": 1, "b": 2} if call == 0 else {"a": 3, "b": 2, "c": 1}
    obj = ns["make_obj"](2 if call == 0 else 3)
    return (x, y, lst, d, obj), leaves


# --------------------------------------------------------------- snapshots
def _tensor_snap(t: torch.Tensor, labels: dict, own: str | None = None):
    key = (t.untyped_storage().data_ptr(), t.device)
    alias = labels.get(key)
    if alias is None and own is not None:
        labels[key] = own
    vals = t.detach().as_subclass(torch.Tensor).clone() if not t.is_meta else None
    dtype = t.dtype if type(t) is torch.Tensor else (t.dtype, type(t).__name__)  # (a subclass's type)
    return ("T", tuple(t.shape), dtype, t.requires_grad, vals, alias)


def snapshot(value: Any, labels: dict, path: str = "out") -> Any:
    if isinstance(value, torch.Tensor):
        return _tensor_snap(value, labels, path)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [snapshot(v, labels, f"{path}[{i}]") for i, v in enumerate(value)])
    if isinstance(value, dict):
        return ("dict", [(k, snapshot(v, labels, f"{path}[{k!r}]")) for k, v in value.items()])
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    if type(value).__module__ == "builtins" or value is None:
        return ("py", type(value).__name__, value)
    return ("obj", type(value).__name__)


def values_equal(a: Any, b: Any, path: str = "") -> str | None:
    """None if equal, else a description of the first difference."""
    if type(a) is not type(b):
        return f"{path}: {a!r} vs {b!r}"
    if isinstance(a, tuple) and a and a[0] == "T" and len(a) == 6:
        _, sa, da, ra, va, aa = a
        _, sb, db, rb, vb, ab = b
        if sa != sb:
            return f"{path}: shape {sa} vs {sb}"
        if da != db:
            return f"{path}: dtype {da} vs {db}"
        if ra != rb:
            return f"{path}: requires_grad {ra} vs {rb}"
        if aa != ab:
            return f"{path}: aliases {aa} vs {ab}"
        if va is not None and vb is not None and not torch.allclose(va, vb, rtol=1e-6, atol=1e-9, equal_nan=True):
            return f"{path}: values differ (max abs diff {(va - vb).abs().nan_to_num().max().item():.3g})"
        return None
    if isinstance(a, (tuple, list)):
        if len(a) != len(b):
            return f"{path}: {a!r} vs {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            why = values_equal(x, y, f"{path}.{i}")
            if why:
                return why
        return None
    if a != b:
        return f"{path}: {a!r} vs {b!r}"
    return None


@dataclass
class CallRecord:
    result: Any = None
    exc: tuple | None = None        # (type name, message)
    exc_internal: bool = False      # raised from inside ember's own code
    exc_tb: str = ""
    inputs_after: Any = None
    grads: Any = None
    grad_exc: tuple | None = None


@dataclass
class RunRecord:
    calls: list = field(default_factory=list)
    sink: str = ""
    log: Any = None
    stats: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)


_COMPILING_FILES = {os.path.join(EMBER_DIR, *p) for p in (("capture", "convert_frame.py"),
                                                         ("aot", "compile.py"), ("backends", "aot.py"))}


def _is_internal(e: BaseException) -> bool:
    if isinstance(e, ember.Unsupported):
        return True
    tb = traceback.extract_tb(e.__traceback__)
    if bool(tb) and os.path.abspath(tb[-1].filename).startswith(EMBER_DIR):
        return True
    # (raised inside torch while ember compiled a frame: an internal error too, e.g. a ShapeEnv
    # assertion while producing guards; the program's own errors do not come from there)
    return any(os.path.abspath(f.filename) in _COMPILING_FILES for f in tb)


def _is_refusal(call: CallRecord) -> bool:
    """AOT refusing a program whose joint trace trips autograd's in-place version
    check (torch's AOTAutograd rejects these too): a documented fallback, not a crash."""
    return call.exc[0] == "AOTCompileError" and "modified by an inplace operation" in call.exc[1]


def _obj_state(obj) -> dict:
    return {k: v for k, v in sorted(vars(obj).items())}


def _module_state(mod) -> dict:
    """An nn.Module global's state (gen_extra.py's MOD): parameters, buffers, plain attributes."""
    state = {k: v for k, v in mod.state_dict(keep_vars=True).items()}
    state.update({k: v for k, v in sorted(vars(mod).items()) if not k.startswith("_") and k != "training"})
    state["training"] = mod.training
    return state


def exec_program(src: str, name: str) -> dict:
    filename = f"<fuzz {name}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    ns: dict = {"__name__": "fuzz_program"}
    exec(compile(src, filename, "exec"), ns)
    return ns


def run_program(src: str, name: str, *, backend: str | None, grad: bool, strict: bool = True,
                calls: int = 2) -> RunRecord:
    """backend None: eager; else ember.compile(f, backend=backend)."""
    ember.reset()
    ns = exec_program(src, name)
    fn = ns["f"]
    if backend is not None:
        fn = ember.compile(fn, backend=backend)
    rec = RunRecord()
    with contextlib.ExitStack() as stack:
        stack.enter_context(ember.config.patch(strict=strict))
        if backend == "inductor":  # (Inductor's own random numbers differ from eager's by design)
            import torch._inductor.config as inductor_config
            stack.enter_context(inductor_config.patch(fallback_random=True))
        caught = stack.enter_context(warnings.catch_warnings(record=True))
        warnings.simplefilter("always")
        for call in range(3 if VARY else calls):
            rec.calls.append(_one_call(fn, ns, call, grad))
    rec.sink = ns["SINK"].getvalue()
    rec.log = list(ns["LOG"])
    rec.stats = ember.stats() if backend is not None else {}
    rec.warnings = [str(w.message) for w in caught if "ember" in str(w.message).lower()
                    or "eager" in str(w.message).lower()]
    return rec


def _one_call(fn, ns, call: int, grad: bool) -> CallRecord:
    cr = CallRecord()
    args, leaves = make_inputs(call, grad, ns)
    x, y, lst, d, obj = args
    labels = {(x.untyped_storage().data_ptr(), x.device): "in:x",
              (y.untyped_storage().data_ptr(), y.device): "in:y"}
    try:
        out = fn(*args)
    except Exception as e:  # noqa: BLE001 - compared against eager
        out = None
        cr.exc = (type(e).__name__, str(e))
        cr.exc_internal = _is_internal(e)
        cr.exc_tb = "".join(traceback.format_exception(e))
    cr.result = snapshot(out, labels)
    cr.inputs_after = (snapshot(x, {}), snapshot(y, {}), tuple(x.stride()), tuple(y.stride()),
                       snapshot(list(lst), {}, "lst"), snapshot(dict(d), {}, "d"), type(obj).__name__,
                       snapshot(_obj_state(obj), {}, "obj"),
                       snapshot(_module_state(ns["MOD"]), {}, "MOD") if "MOD" in ns else None,
                       snapshot(_module_state(ns["BN"]), {}, "BN") if "BN" in ns else None)
    params = [p for m in ("MOD", "BN") if m in ns for p in ns[m].parameters()]
    if grad and cr.exc is None:
        try:
            loss = None
            for t in (x, y):
                if t.requires_grad:
                    loss = t.sum() if loss is None else loss + t.sum()
            for t in _tensors(out):
                if t.requires_grad and t.is_floating_point():
                    loss = t.sum() if loss is None else loss + t.sum()
            if loss is not None:
                loss.backward()
            cr.grads = [snapshot(l.grad, {}) for l in leaves + params]
            for p in params:     # (they accumulate over calls: compare each call's own)
                p.grad = None
        except Exception as e:  # noqa: BLE001
            cr.grad_exc = (type(e).__name__, str(e).split("\n")[0])
    return cr


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)


# ---------------------------------------------------------------- compare
def compare(ref: RunRecord, got: RunRecord) -> list[tuple[str, str]]:
    """Differences as (kind, detail); kind in result/exception/exc_message/inputs/side_effects/grads."""
    diffs = []
    for i, (a, b) in enumerate(zip(ref.calls, got.calls)):
        if (a.exc is None) != (b.exc is None) or (a.exc and a.exc[0] != b.exc[0]):
            diffs.append(("exception", f"call {i}: eager {a.exc} vs ember {b.exc}"))
            continue
        if a.exc and a.exc[1] != b.exc[1]:
            diffs.append(("exc_message", f"call {i}: eager {a.exc} vs ember {b.exc}"))
        why = values_equal(a.result, b.result, "out")
        if why:
            diffs.append(("result", f"call {i}: {why}"))
        why = values_equal(a.inputs_after, b.inputs_after, "inputs")
        if why:
            diffs.append(("inputs", f"call {i}: {why}"))
        if (a.grad_exc is None) != (b.grad_exc is None) or (a.grad_exc and a.grad_exc[0] != b.grad_exc[0]):
            diffs.append(("grads", f"call {i}: backward eager {a.grad_exc} vs ember {b.grad_exc}"))
        else:
            why = values_equal(a.grads, b.grads, "grads")
            if why:
                diffs.append(("grads", f"call {i}: {why}"))
    if ref.sink != got.sink:
        diffs.append(("side_effects", f"printed {ref.sink!r} vs {got.sink!r}"))
    if ref.log != got.log:
        diffs.append(("side_effects", f"LOG {ref.log!r} vs {got.log!r}"))
    return diffs


@dataclass
class Outcome:
    backend: str
    grad: bool
    status: str               # ok / wrong / crash / crash_fallback_ok
    diffs: list = field(default_factory=list)
    detail: str = ""
    stats: dict = field(default_factory=dict)


def check_program(src: str, name: str = "prog", configs=CONFIGS, refs=None) -> list[Outcome]:
    """refs: optional {grad: eager RunRecord} already computed for this program."""
    outcomes = []
    refs = {} if refs is None else refs
    for backend, grad in configs:
        if grad not in refs:
            refs[grad] = run_program(src, name, backend=None, grad=grad)
        ref = refs[grad]
        got = run_program(src, name, backend=backend, grad=grad, strict=True)
        internal = [c for c, r in zip(got.calls, ref.calls)
                    if c.exc_internal and (r.exc is None or r.exc[0] != c.exc[0])]
        if internal:
            # strict: an internal error is a crash; non-strict must fall back to eager's answer
            detail = internal[0].exc_tb
            relaxed = run_program(src, name, backend=backend, grad=grad, strict=False)
            diffs = compare(ref, relaxed)
            bad = [d for d in diffs if d[0] != "exc_message"]
            if bad:
                status = "crash_fallback_wrong"
            elif _is_refusal(internal[0]):
                status = "refused"
            else:
                status = "crash"
            outcomes.append(Outcome(backend, grad, status, diffs, detail, relaxed.stats))
            continue
        diffs = compare(ref, got)
        bad = [d for d in diffs if d[0] != "exc_message"]
        status = "wrong" if bad else ("exc_message" if diffs else "ok")
        detail = next((c.exc_tb for c in got.calls if c.exc), "")
        outcomes.append(Outcome(backend, grad, status, diffs, detail, got.stats))
    return outcomes
