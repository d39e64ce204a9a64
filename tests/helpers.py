"""Shared helpers for ember's eager-comparison tests.

    from ember_test_helpers import CompileCounter, check_same, check_module_same

(tests/conftest.py registers this file under that name; ``helpers`` is taken
by tests/aot/helpers.py.)

``check_same(fn, *args)`` runs ``fn`` eagerly and compiled (on independent
copies of the inputs) and compares outputs, inputs mutated by the call and
gradients, then asserts how many graphs the backend saw.

Reference switch: with ``EMBER_TEST_REFERENCE=torch`` every helper uses
``torch.compile`` (Dynamo) instead of ember, so the test programs and expected
graph counts can be validated against torch's own frontend.  Tests that rely on
behaviour where ember and Dynamo legitimately differ (ember has no graph breaks
yet: an unsupported construct makes the whole frame run eagerly) check
``REFERENCE`` and say why.
"""
from __future__ import annotations

import contextlib
import copy
import logging
import math
import os
import warnings
from typing import Any, Callable

import torch

REFERENCE = os.environ.get("EMBER_TEST_REFERENCE", "").strip().lower() == "torch"

# A frame whose only tensor work is returning an input unchanged: ember compiles no
# graph (there is nothing to run); Dynamo compiles a graph for a bare `return x`
# (but not for `return x, 3`). Tests use this where they hit that case.
IDENTITY_GRAPHS = 1 if REFERENCE else 0

if REFERENCE:
    import torch._dynamo
    import torch._dynamo.exc
    import torch._dynamo.utils

    # Dynamo 2.13 captures .item() as an unbacked symbol and then reports a branch
    # on it as UserError ("Could not guard on data-dependent expression"), not
    # Unsupported; ember raises ember.Unsupported for both.
    UNSUPPORTED: tuple[type[BaseException], ...] = (torch._dynamo.exc.Unsupported,
                                                    torch._dynamo.exc.UserError)
else:
    import ember

    UNSUPPORTED = (ember.Unsupported,)


# --------------------------------------------------------------------------- #
# backend, compile, reset, stats — one spelling for ember and the reference
# --------------------------------------------------------------------------- #

class CompileCounter:
    """A backend (torch.compile contract) that counts and keeps what it is given.

    ``frame_count``: graphs compiled; ``op_count``: call nodes over all graphs;
    ``graphs`` / ``example_inputs``: what each call received.
    """

    def __init__(self):
        self.frame_count = 0
        self.op_count = 0
        self.graphs: list[torch.fx.GraphModule] = []
        self.example_inputs: list[list] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list):
        self.frame_count += 1
        self.op_count += count_ops(gm)
        self.graphs.append(gm)
        self.example_inputs.append(list(example_inputs))
        return gm.forward

    def clear(self) -> None:
        self.__init__()

    def targets(self, i: int = -1) -> list:
        """The call targets (functions, method names, module paths) of graph ``i``."""
        return [n.target for n in self.graphs[i].graph.nodes
                if n.op in ("call_function", "call_method", "call_module")]

    def __repr__(self):
        return f"CompileCounter(frame_count={self.frame_count}, op_count={self.op_count})"


def count_ops(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))


def compile(fn, *, backend=None, fullgraph: bool = False, dynamic=None, **kwargs):
    """``ember.compile`` (or ``torch.compile`` under the reference switch)."""
    if backend is None:
        backend = "eager"
    if REFERENCE:
        return torch.compile(fn, backend=backend, fullgraph=fullgraph, dynamic=dynamic, **kwargs)
    return ember.compile(fn, backend=backend, fullgraph=fullgraph, dynamic=dynamic, **kwargs)


def reset() -> None:
    if REFERENCE:
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
    else:
        ember.reset()


def stats() -> dict[str, int]:
    """``ember.stats()``; under the reference switch, the nearest Dynamo counters.

    Reference mapping: ``graph_breaks`` counts Dynamo's "unimplemented" records
    (each graph break or skipped frame), ``fallbacks`` the frames Dynamo started
    but skipped (ran eagerly), ``recompiles`` the recorded guard failures.
    """
    if not REFERENCE:
        return ember.stats()
    c = torch._dynamo.utils.counters
    return {
        "frames": c["frames"]["ok"],
        "graphs": c["stats"]["unique_graphs"],
        "recompiles": sum(len(v) for v in torch._dynamo.utils.guard_failures.values()),
        "graph_breaks": sum(c["graph_break"].values()) + sum(c["unimplemented"].values()),
        "fallbacks": c["frames"]["total"] - c["frames"]["ok"],
    }


@contextlib.contextmanager
def recompile_limit(n: int):
    """Temporarily set the recompile limit (ember.config or torch._dynamo.config)."""
    if REFERENCE:
        with torch._dynamo.config.patch(recompile_limit=n):
            yield
    else:
        with ember.config.patch(recompile_limit=n):
            yield


def default_recompile_limit() -> int:
    return torch._dynamo.config.recompile_limit if REFERENCE else ember.config.recompile_limit


class _LogCollector(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@contextlib.contextmanager
def collect_warnings():
    """Collect both ``warnings.warn`` messages and WARNING log records (Dynamo
    logs its recompile-limit warning; ember may use either) as strings."""
    messages: list[str] = []
    handler = _LogCollector()
    loggers = [logging.getLogger(name) for name in ("", "torch", "torch._dynamo", "ember")]
    for lg in loggers:
        lg.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield messages
    finally:
        for lg in loggers:
            lg.removeHandler(handler)
        seen = set()
        for w in caught:
            messages.append(str(w.message))
        for r in handler.records:
            if id(r) not in seen:
                seen.add(id(r))
                messages.append(r.getMessage())


# --------------------------------------------------------------------------- #
# copying and comparing values
# --------------------------------------------------------------------------- #

def clone_input(t: torch.Tensor) -> torch.Tensor:
    """An independent copy with the same values, strides and requires_grad, and the same class and
    attributes for a tensor subclass made with ``as_subclass`` (not a Parameter, nor a
    ``__torch_dispatch__`` wrapper: those come back as plain tensors)."""
    cls = type(t)
    keep_class = cls is not torch.Tensor and not isinstance(t, torch.nn.Parameter) and \
        getattr(cls, "__torch_dispatch__", None) is torch._C._disabled_torch_dispatch_impl
    with torch.no_grad(), torch._C.DisableTorchFunctionSubclass():
        c = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)
        c.copy_(t)
        if keep_class:
            c = c.as_subclass(cls)
            c.__dict__.update(t.__dict__)
    if t.requires_grad:
        c.requires_grad_(True)
    return c


def clone_inputs(value: Any) -> Any:
    """Deep copy of nested tuples/lists/dicts of tensors; anything else is shared."""
    if isinstance(value, torch.Tensor):
        return clone_input(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # namedtuple
        return type(value)(*[clone_inputs(v) for v in value])
    if isinstance(value, (tuple, list)):
        return type(value)(clone_inputs(v) for v in value)
    if isinstance(value, dict):
        return type(value)((k, clone_inputs(v)) for k, v in value.items())
    return value


def assert_same(actual: Any, expected: Any, path: str = "out", *, rtol=None, atol=None,
                check_requires_grad: bool = True) -> None:
    """Structural equality: same container types and keys, tensors close with
    exact dtype/shape (and requires_grad), constants equal with the same type."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: expected a Tensor, got {type(actual).__name__}"
        assert type(actual) is type(expected), f"{path}: {type(actual).__name__} != {type(expected).__name__}"
        assert actual.shape == expected.shape, f"{path}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.device == expected.device, f"{path}: device {actual.device} != {expected.device}"
        if check_requires_grad:
            assert actual.requires_grad == expected.requires_grad, (
                f"{path}: requires_grad {actual.requires_grad} != {expected.requires_grad}")
        torch.testing.assert_close(actual.detach(), expected.detach(), rtol=rtol, atol=atol,
                                   equal_nan=True, msg=lambda m: f"{path}: {m}")
        return
    if isinstance(expected, torch.nn.Module):
        assert actual is expected, f"{path}: expected the same module object"
        return
    if isinstance(expected, (torch.Size,)):
        assert isinstance(actual, (torch.Size, tuple)), f"{path}: expected torch.Size, got {type(actual).__name__}"
        assert tuple(actual) == tuple(expected), f"{path}: {actual} != {expected}"
        return
    if isinstance(expected, (tuple, list)):
        assert type(actual) is type(expected), (
            f"{path}: container type {type(actual).__name__} != {type(expected).__name__}")
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{path}[{i}]", rtol=rtol, atol=atol, check_requires_grad=check_requires_grad)
        return
    if isinstance(expected, dict):
        assert type(actual) is type(expected), (
            f"{path}: container type {type(actual).__name__} != {type(expected).__name__}")
        assert list(actual.keys()) == list(expected.keys()), f"{path}: keys {list(actual)} != {list(expected)}"
        for k in expected:
            assert_same(actual[k], expected[k], f"{path}[{k!r}]", rtol=rtol, atol=atol,
                        check_requires_grad=check_requires_grad)
        return
    if isinstance(expected, (set, frozenset)):
        assert type(actual) is type(expected) and actual == expected, f"{path}: {actual!r} != {expected!r}"
        return
    if isinstance(expected, float):
        assert type(actual) is float, f"{path}: expected float, got {type(actual).__name__} ({actual!r})"
        if math.isnan(expected):
            assert math.isnan(actual), f"{path}: {actual!r} != nan"
        else:
            assert actual == expected or math.isclose(actual, expected, rel_tol=1e-6, abs_tol=1e-9), (
                f"{path}: {actual!r} != {expected!r}")
        return
    if hasattr(expected, "__dict__") and hasattr(expected, "keys") and hasattr(expected, "items"):
        # ModelOutput and other mapping-like results
        assert type(actual) is type(expected), f"{path}: type {type(actual).__name__} != {type(expected).__name__}"
        assert list(actual.keys()) == list(expected.keys()), f"{path}: keys {list(actual.keys())} != {list(expected.keys())}"
        for k in expected.keys():
            assert_same(actual[k], expected[k], f"{path}.{k}", rtol=rtol, atol=atol,
                        check_requires_grad=check_requires_grad)
        return
    assert type(actual) is type(expected), f"{path}: type {type(actual).__name__} != {type(expected).__name__}"
    assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def _flat_tensors(value: Any) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, (tuple, list)):
        for v in value:
            out.extend(_flat_tensors(v))
    elif isinstance(value, dict):
        for v in value.values():
            out.extend(_flat_tensors(v))
    elif hasattr(value, "keys") and hasattr(value, "__getitem__") and not isinstance(value, str):
        for k in value.keys():
            out.extend(_flat_tensors(value[k]))
    return out


def _backward_of_outputs(out: Any) -> bool:
    """Sum of all differentiable outputs, backward. False if nothing needs grad."""
    ts = [t for t in _flat_tensors(out) if t.requires_grad and (t.is_floating_point() or t.is_complex())]
    if not ts:
        return False
    total = sum(t.float().sum() if not t.is_complex() else t.abs().sum() for t in ts)
    total.backward()
    return True


def _grads_of(value: Any) -> list:
    return [t.grad for t in _flat_tensors(value) if t.is_leaf and t.requires_grad]


# --------------------------------------------------------------------------- #
# check_same / check_module_same
# --------------------------------------------------------------------------- #

def run_compared(fn: Callable, make_args: Callable, n_calls: int = 1, **kwargs) -> CompileCounter:
    """Call ``fn`` compiled and eagerly ``n_calls`` times, each on fresh arguments from
    ``make_args(i)``; outputs and the arguments afterwards (mutations) must match. The counter."""
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt, **kwargs)
    for i in range(n_calls):
        args_c, args_e = make_args(i), make_args(i)
        assert_same(compiled(*args_c), fn(*args_e))
        assert_same(args_c, args_e)
    return cnt


def check_same(fn: Callable, *args, graphs: int | None = 1, fullgraph: bool = True,
               counter: CompileCounter | None = None, check_cache: bool = True,
               dynamic=None, rtol=None, atol=None, **kwargs) -> CompileCounter:
    """Run ``fn(*args, **kwargs)`` eagerly and compiled; assert they agree.

    Compares outputs, inputs after the call (mutations), and the gradients of
    leaf inputs after ``sum(outputs).backward()`` if any output requires grad.
    ``graphs``: how many graphs the backend must have seen (None: don't check).
    ``check_cache``: call the compiled function a second time on fresh copies
    and require no new graph (the guards must hold for identical inputs).
    Returns the CompileCounter.
    """
    counter = counter if counter is not None else CompileCounter()
    compiled = compile(fn, backend=counter, fullgraph=fullgraph, dynamic=dynamic)

    eager_args, eager_kwargs = clone_inputs(args), clone_inputs(kwargs)
    comp_args, comp_kwargs = clone_inputs(args), clone_inputs(kwargs)

    expected = fn(*eager_args, **eager_kwargs)
    actual = compiled(*comp_args, **comp_kwargs)

    assert_same(actual, expected, "output", rtol=rtol, atol=atol)
    assert_same(comp_args, eager_args, "args after call", rtol=rtol, atol=atol)
    assert_same(comp_kwargs, eager_kwargs, "kwargs after call", rtol=rtol, atol=atol)

    if _backward_of_outputs(expected):
        assert _backward_of_outputs(actual), "compiled outputs do not require grad"
        assert_same(_grads_of((comp_args, comp_kwargs)), _grads_of((eager_args, eager_kwargs)),
                    "input grads", rtol=rtol, atol=atol, check_requires_grad=False)

    if graphs is not None:
        assert counter.frame_count == graphs, (
            f"expected {graphs} graph(s), the backend saw {counter.frame_count}")

    if check_cache:
        seen = counter.frame_count
        again_args, again_kwargs = clone_inputs(args), clone_inputs(kwargs)
        again = compiled(*again_args, **again_kwargs)
        expected2 = fn(*clone_inputs(args), **clone_inputs(kwargs))
        assert_same(again, expected2, "output (second call)", rtol=rtol, atol=atol)
        assert counter.frame_count == seen, (
            f"calling again with identical inputs compiled {counter.frame_count - seen} new graph(s)")
    return counter


def check_module_same(module_factory: Callable[[], torch.nn.Module], *args, graphs: int | None = 1,
                      fullgraph: bool = True, train: bool | None = None,
                      counter: CompileCounter | None = None, check_cache: bool = False,
                      rtol=None, atol=None, seed: int = 0, **kwargs) -> CompileCounter:
    """Compare a module eagerly and compiled (two copies with the same weights).

    Compares outputs, buffers and parameters after the call (running stats),
    inputs after the call, and parameter and input grads after
    ``sum(outputs).backward()`` when the outputs require grad.
    ``train``: put both copies in train(True)/eval(False) mode first.
    """
    torch.manual_seed(seed)
    eager_mod = module_factory()
    if train is not None:
        eager_mod.train(train)
    comp_mod = copy.deepcopy(eager_mod)
    counter = counter if counter is not None else CompileCounter()
    compiled = compile(comp_mod, backend=counter, fullgraph=fullgraph)

    eager_args, eager_kwargs = clone_inputs(args), clone_inputs(kwargs)
    comp_args, comp_kwargs = clone_inputs(args), clone_inputs(kwargs)
    expected = eager_mod(*eager_args, **eager_kwargs)
    actual = compiled(*comp_args, **comp_kwargs)

    assert_same(actual, expected, "output", rtol=rtol, atol=atol)
    assert_same(comp_args, eager_args, "args after call", rtol=rtol, atol=atol)
    assert_same(dict(comp_mod.named_buffers()), dict(eager_mod.named_buffers()), "buffers after call",
                rtol=rtol, atol=atol)
    assert_same(dict(comp_mod.named_parameters()), dict(eager_mod.named_parameters()),
                "parameters after call", rtol=rtol, atol=atol)

    if _backward_of_outputs(expected):
        assert _backward_of_outputs(actual), "compiled outputs do not require grad"
        grads_e = {n: p.grad for n, p in eager_mod.named_parameters()}
        grads_c = {n: p.grad for n, p in comp_mod.named_parameters()}
        assert_same(grads_c, grads_e, "parameter grads", rtol=rtol, atol=atol, check_requires_grad=False)
        assert_same(_grads_of((comp_args, comp_kwargs)), _grads_of((eager_args, eager_kwargs)),
                    "input grads", rtol=rtol, atol=atol, check_requires_grad=False)

    if graphs is not None:
        assert counter.frame_count == graphs, (
            f"expected {graphs} graph(s), the backend saw {counter.frame_count}")

    if check_cache:
        seen = counter.frame_count
        compiled(*clone_inputs(args), **clone_inputs(kwargs))
        assert counter.frame_count == seen, "calling again with identical inputs compiled a new graph"
    return counter


def check_raises_same(fn: Callable, *args, fullgraph: bool = False, **kwargs) -> BaseException:
    """Eager and compiled ``fn`` raise the same exception type and message."""
    compiled = compile(fn, backend=CompileCounter(), fullgraph=fullgraph)
    try:
        fn(*clone_inputs(args), **clone_inputs(kwargs))
    except Exception as e:  # noqa: BLE001
        expected = e
    else:
        raise AssertionError("eager did not raise")
    try:
        compiled(*clone_inputs(args), **clone_inputs(kwargs))
    except Exception as e:  # noqa: BLE001
        actual = e
    else:
        raise AssertionError(f"compiled did not raise (eager raised {expected!r})")
    assert type(actual) is type(expected), f"{type(actual).__name__} != {type(expected).__name__}: {actual}"
    assert str(actual) == str(expected), f"{str(actual)!r} != {str(expected)!r}"
    return actual
