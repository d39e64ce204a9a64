"""Settings a program made for torch.compile in ``torch._dynamo.config``, honoured by ember.

A program (or a test) that tunes torch.compile sets ``torch._dynamo.config.recompile_limit``
(alias ``cache_size_limit``), ``automatic_dynamic_shapes``, ``assume_static_by_default``,
``specialize_int``, ``specialize_float``, ``fail_on_recompile_limit_hit``,
``force_parameter_static_shapes``, ``force_nn_module_property_static_shapes``,
``capture_scalar_outputs`` or ``capture_dynamic_output_shape_ops``; ember
compiling the same program reads those user settings so that its recompiles follow them. The
callables a program marked with ``torch._dynamo.disallow_in_graph`` break the graph under ember
too, and those marked ``allow_in_graph`` are one graph node each. This
module only reads plain values from the config module when the program has imported it (it never
imports it, and calls nothing of Dynamo); ember's own ``ember.config`` wins where it was changed
from its default.

    torch._dynamo.config.recompile_limit = 2     # ember: at most 2 entries per code object
    torch._dynamo.config.automatic_dynamic_shapes = False   # dynamic=None behaves as dynamic=False
    torch._dynamo.config.assume_static_by_default = False   # dynamic=None behaves as dynamic=True
"""
from __future__ import annotations

import sys
import types

_DEFAULT_RECOMPILE_LIMIT = 8  # (ember's default and torch's)


def _dynamo_config():
    return sys.modules.get("torch._dynamo.config")


def _read(name: str, default):
    cfg = _dynamo_config()
    if cfg is None:
        return default
    try:
        return getattr(cfg, name)
    except Exception:  # noqa: BLE001 — a release without the setting: torch's default
        return default


def recompile_limit() -> int:
    """How many compiled entries a code object may have: ``ember.config.recompile_limit``, or
    torch's setting where ember's is at its default."""
    from ember.config import config
    if config.recompile_limit != _DEFAULT_RECOMPILE_LIMIT:
        return config.recompile_limit
    value = _read("recompile_limit", _DEFAULT_RECOMPILE_LIMIT)
    return value if isinstance(value, int) and not isinstance(value, bool) else config.recompile_limit


def effective_dynamic(dynamic):
    """``compile(dynamic=...)`` as torch's settings make it: None (automatic dynamic) becomes True
    under ``assume_static_by_default=False`` and False under ``automatic_dynamic_shapes=False``."""
    if dynamic is not None:
        return dynamic
    if _read("assume_static_by_default", True) is False:
        return True
    if _read("automatic_dynamic_shapes", True) is False:
        return False
    return None


def specialize_float() -> bool:
    """Float arguments stay constants (a recompile per value): ember's setting or torch's."""
    from ember.config import config
    return config.specialize_float or _read("specialize_float", False) is True


def specialize_int() -> bool:
    """Int arguments stay constants even when their value changes (torch's ``specialize_int``)."""
    return _read("specialize_int", False) is True


def force_parameter_static_shapes() -> bool:
    """Parameters (and the parameters and buffers of the program's own modules) keep static sizes
    (torch's setting, default True; False: they size as other tensors, automatic dynamic included)."""
    return _read("force_parameter_static_shapes", True) is not False


def force_nn_module_property_static_shapes() -> bool:
    """The parameters and buffers of torch.nn's own modules (``nn.Linear``'s weight) keep static
    sizes even with ``force_parameter_static_shapes`` off (torch's setting, default True)."""
    return _read("force_nn_module_property_static_shapes", True) is not False


def fail_on_recompile_limit_hit() -> bool:
    """A call past the recompile limit raises (instead of running eagerly): ember's setting or torch's."""
    from ember.config import config
    return config.fail_on_recompile_limit_hit or _read("fail_on_recompile_limit_hit", False) is True


def capture_scalar_outputs() -> bool:
    """``.item()`` / ``.tolist()`` of a computed tensor are unbacked symbols: ember's or torch's setting."""
    from ember.config import config
    return config.capture_scalar_outputs or _read("capture_scalar_outputs", False) is True


def capture_dynamic_output_shape_ops() -> bool:
    """Data-dependent output sizes (``nonzero``, ``x[mask]``) are unbacked: ember's or torch's setting."""
    from ember.config import config
    return config.capture_dynamic_output_shape_ops or _read("capture_dynamic_output_shape_ops", False) is True


def _registered(registry: str, fn) -> bool:
    """``fn`` is in one of the id sets that ``torch._dynamo.allow_in_graph`` /
    ``disallow_in_graph`` fill (plain data, None until anything was registered); nothing of
    Dynamo is called."""
    rules = sys.modules.get("torch._dynamo.trace_rules")
    ids = getattr(getattr(rules, registry, None), "function_ids", None)
    if not ids:
        return False
    try:
        return id(fn) in ids
    except Exception:  # noqa: BLE001 — a release that keeps another kind of collection there
        return False


def disallowed_in_graph(fn) -> bool:
    """The program marked ``fn`` with ``torch._dynamo.disallow_in_graph(fn)``: a call of it is a
    graph break, as under torch.compile.

        torch._dynamo.disallow_in_graph(torch.sub)   # ember: torch.sub(...) runs eagerly, between graphs
    """
    return _registered("_disallowed_callable_ids", fn)


def allowed_in_graph(fn) -> bool:
    """The program marked ``fn`` with ``torch.compiler.allow_in_graph(fn)`` (or the
    ``torch._dynamo`` spelling): a call of it is one graph node, run on fake tensors while
    tracing, its body never traced (a ``graph_break()`` in it is no break).

        @torch.compiler.allow_in_graph
        def fused(x): ...                            # ember: one call_function node

    torch's own functions it registers (``torch.nn.attention.bias`` allows the flash-attention
    checks, which answer Python bools) are Dynamo's business: ember traces torch's code as it
    always did. torch's registered callable objects are nodes (the C++ autograd functions in a
    graph torch's compiled autograd made, ``torch._dynamo.compiled_autograd.ops.validate_outputs``,
    which no trace can enter)."""
    if isinstance(fn, types.MethodType) or type(fn).__module__.startswith("ember."):
        # (a bound method is made anew at every read: its id says nothing; ember's own callables,
        # such as the callee a break's residual code binds, are never the program's)
        return False
    module = getattr(fn, "__module__", None)
    if not isinstance(module, str):
        return False
    if (module == "torch" or module.startswith("torch.")) and \
            isinstance(fn, (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
        return False
    # (nonstrict_trace and leaf_function register in the same set, with their own meaning:
    # ember handles those wrappers itself, variables/nonstrict.py)
    return _registered("_allowed_callable_ids", fn) and not _registered("_nonstrict_trace_callable_ids", fn) \
        and not _registered("_leaf_function_ids", fn)
