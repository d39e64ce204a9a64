"""Functions from torch: in-graph operations, grad-mode context managers, constants.

A torch function called on tracked values becomes an fx ``call_function`` node,
its result computed on fake tensors. If the result holds no tensor (e.g.
``torch.is_floating_point(x)``) it is folded to a constant, which is sound
because it depends only on metadata the guards pin. Functions that change
global state outside the graph are refused.
"""
from __future__ import annotations

import types

import torch

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported
from ember.exc import Unsupported
from ember.torch_config import allowed_in_graph, disallowed_in_graph

_REFUSED = {
    torch.manual_seed: "torch.manual_seed changes global RNG state",
    torch.seed: "torch.seed changes global RNG state",
    torch.set_default_dtype: "torch.set_default_dtype changes global state",
    torch.autograd.grad: "torch.autograd.grad inside the compiled region",
    torch.autograd.backward: "torch.autograd.backward inside the compiled region",
    torch.save: "torch.save does I/O",
    torch.load: "torch.load does I/O",
}


def _is_compiling(*args, **kwargs):
    return True


def _constant_result(value):
    return lambda *args, **kwargs: value


# Functions whose answer under ember is a known constant.
_CONSTANT_ANSWERS = {
    torch.compiler.is_compiling: True,
    torch.compiler.is_dynamo_compiling: True,
    torch.jit.is_scripting: False,
    torch.jit.is_tracing: False,
    torch._C._get_tracing_state: None,
}
try:
    import torch.fx._symbolic_trace as _st
    _CONSTANT_ANSWERS[_st.is_fx_tracing] = False
except (ImportError, AttributeError):
    pass
if hasattr(torch._utils, "is_compiling"):  # (the deprecated spelling)
    _CONSTANT_ANSWERS[torch._utils.is_compiling] = True
if hasattr(torch.compiler, "is_exporting"):
    _CONSTANT_ANSWERS[torch.compiler.is_exporting] = False
if hasattr(torch.nn.modules.activation, "_is_make_fx_tracing"):
    # (its answer reads the dispatch-mode stack, where the trace's fake mode is): True as under
    # torch.compile, so MultiheadAttention takes its traceable path rather than the fused fast path
    _CONSTANT_ANSWERS[torch.nn.modules.activation._is_make_fx_tracing] = True


# The queries whose answer (True under ember) tells the program it is being compiled: a frame that
# asked one is committed even with no tensor operation (its answer decided what it did), as
# torch.compile commits it, rather than skipped and run eagerly (where the answer is False).
_COMPILING_QUERIES = frozenset(f for f, answer in _CONSTANT_ANSWERS.items() if answer is True
                               and getattr(f, "__name__", "") in ("is_compiling", "is_dynamo_compiling"))


def _is_compiler_api(module: str) -> bool:
    """A function of torch's compiler API that user code calls (``torch.compiler.*`` and the
    ``_dynamo`` package's ``graph_break``, ``mark_dynamic``, ``disable``, ...)."""
    parts = module.split(".")
    return parts[0] == "torch" and len(parts) > 1 and parts[1] in ("compiler", "_dynamo")


# torch/_dynamo/external_utils.py functions that keep no compiler state: ordinary Python over
# their arguments (call_accumulate_grad calls the compiled-autograd AccumulateGrad op, a node, and
# sets .grad; the final-callbacks stub does nothing; call_backward enters a program's Function's
# backward through a stand-in ctx, see _user_function_backward).
_EXTERNAL_HELPERS = frozenset({"unwrap_maybe_dynamic_int", "call_hook", "call_accumulate_grad", "call_backward",
                               "normalize_as_list", "untyped_storage_size", "_exec_final_callbacks_stub"})


def call_allowed(tx, fn, args, kwargs, source=None):
    """A call of a function the program marked ``allow_in_graph``: one node, run on fake tensors.
    An argument no graph call can take (a dataclass object, EB0030, refused before any node is
    made) has the function traced as Python instead, which computes the same; a result holding a
    tensor subclass (which the AOT layer cannot take from an opaque node) is a graph break."""
    try:
        out = tx.output.call_function(fn, args, kwargs)
    except Unsupported as e:
        if e.id != "EB0030" or not isinstance(fn, types.FunctionType):
            raise
        from ember.capture.variables.functions import UserFunctionVariable
        return UserFunctionVariable(fn, source).call(tx, args, kwargs, traced=True)
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass
    if any(is_traceable_wrapper_subclass(t) for t in _fakes_in(out)):
        raise unsupported("EB0030", f"{getattr(fn, '__qualname__', fn)} (allow_in_graph) returns a tensor subclass")
    return out


def _fakes_in(vt) -> list:
    """The fake tensors of a call's result (a tensor, or a tuple or list of results)."""
    fake = getattr(vt, "fake", None)
    if isinstance(fake, torch.Tensor):
        return [fake]
    return [f for item in getattr(vt, "items", None) or () if isinstance(item, VariableTracker)
            for f in _fakes_in(item)]


def _user_function_backward(ctx_vt) -> bool:
    """``call_backward(ctx, saved, *grads)`` in a compiled-autograd graph is the program's own
    ``autograd.Function`` (its backward traced as torch.compile traces it), not one ember's AOT
    layer made, whose backward is ember's runtime (never traced)."""
    real = next((v for v in (getattr(ctx_vt, a, None) for a in ("value", "obj")) if v is not None), None)
    forward_cls = getattr(type(real), "_forward_cls", None)
    module = getattr(forward_cls, "__module__", None) or ""
    # (capture's stand-in for the program's Function, variables/generated_function.py, calls the
    # program's backward: traced through; the AOT layer's is ember's runtime: never)
    return isinstance(forward_cls, type) and (not module.startswith("ember") or module == _GENERATED_MODULE)


_GENERATED_MODULE = "ember.capture.variables.generated_function"


def _checkpoint():
    import torch.utils.checkpoint
    return torch.utils.checkpoint.checkpoint


def _associative_scan():
    """torch's associative_scan when its module is loaded (the program imported it), else None."""
    import sys
    module = sys.modules.get("torch._higher_order_ops.associative_scan")
    return getattr(module, "associative_scan", None) if module is not None else None


_STATE_READERS = {torch.get_default_dtype: "default_dtype",
                  torch.are_deterministic_algorithms_enabled: "deterministic",
                  torch.is_deterministic_algorithms_warn_only_enabled: "deterministic_warn_only",
                  torch.get_float32_matmul_precision: "matmul_precision",
                  torch.is_anomaly_enabled: "anomaly", torch.is_anomaly_check_nan_enabled: "anomaly_nan",
                  torch.get_num_threads: "num_threads", torch.autograd._profiler_enabled: "profiler"}


# Python functions of these torch modules are graph operations (one call node, computed on fake
# tensors): the functional namespaces, whose results depend only on their tensor arguments.
_GRAPH_OP_MODULES = ("torch.nn.functional", "torch.functional", "torch.nn.init", "torch.nn.utils",
                     "torch._higher_order_ops", "torch.overrides", "torch._refs", "torch._prims",
                     "torch._decomp", "torch.fft", "torch.linalg", "torch.special", "torch.masked",
                     "torch.sparse", "torch.nested", "torch._tensor", "torch._linalg_utils", "torch._lowrank",
                     "torch.autograd.functional", "torch.fx.experimental.symbolic_shapes")


def _calls_its_first_argument(fn, module: str, name: str) -> bool:
    """``invoke_subgraph_placeholder(func, *args, **kwargs)`` (what a function marked with
    ``torch.compiler.nested_compile_region`` calls) and the ``wrap`` operator (``wrap(func, *args)``):
    in eager both are ``func(*args, **kwargs)``."""
    if module == "torch._higher_order_ops.invoke_subgraph" and name == "invoke_subgraph_placeholder":
        return True
    cls = type(fn)
    return cls.__name__ == "Wrap" and cls.__module__ == "torch._higher_order_ops.wrap"


class TorchFunctionVariable(VariableTracker):
    def __init__(self, fn, source=None):
        self.fn = fn
        self.source = source

    def describe(self):
        return f"torch function {getattr(self.fn, '__qualname__', self.fn)!s}"

    @property
    def eager_rest(self) -> bool:
        """A break at this call runs the rest of the frame eagerly (``step_unsupported()``; see
        graph_break.py)."""
        return getattr(self.fn, "__name__", "") == "step_unsupported" and \
            _is_compiler_api(getattr(self.fn, "__module__", None) or "")

    def python_type(self):
        return type(self.fn)

    def truth(self, tx):
        return True

    def getattr(self, tx, name):
        from ember.capture.builder import wrap
        if name == "__get__" and type(self.fn) is types.FunctionType:
            # binding torch's Python function to an object makes a method, as a class lookup does
            # (the lr scheduler's `func.__get__(opt, type(opt))` of an optimizer's step)
            from ember.capture.variables.functions import FunctionGetVariable, UserFunctionVariable
            return FunctionGetVariable(UserFunctionVariable(self.fn, self.source))
        if type(self.fn) is types.FunctionType and name in self.fn.__dict__:
            # set on the function object (a decorator's mark, `__wrapped__`): guarded, as a user
            # function's (`relu.marked = 10` after the compile is seen)
            from ember.capture.sources import AttrSource
            from ember.capture.variables.functions import function_source
            return wrap(tx, self.fn.__dict__[name], AttrSource(function_source(self.fn, self.source), name))
        try:
            return wrap(tx, getattr(self.fn, name), None)
        except AttributeError:
            if type(self.fn) is not types.FunctionType:
                return super().getattr(tx, name)
        # torch's Python function without it (`inspect.unwrap(Adam.step)` asks for `__wrapped__`)
        from ember.capture.variables.functions import function_source
        from ember.capture.variables.objects import MissingAttribute, _guard_absent
        _guard_absent(tx, function_source(self.fn, self.source), self.fn, name)
        raise MissingAttribute(f"'function' object has no attribute '{name}'")

    def call(self, tx, args, kwargs):
        fn = self.fn
        if disallowed_in_graph(fn) and not _is_compiler_api(getattr(fn, "__module__", None) or ""):  # `torch._dynamo.disallow_in_graph(torch.sub)`: the program's request
            raise unsupported("EB0029", f"{getattr(fn, '__qualname__', fn)} is marked disallow_in_graph: it runs eagerly")
        if allowed_in_graph(fn):  # the program's `allow_in_graph(fn)`: one node
            return call_allowed(tx, fn, args, kwargs, self.source)
        if fn in _CONSTANT_ANSWERS:
            if fn in _COMPILING_QUERIES:
                tx.output.observes_compiling = True  # (the frame is then never skipped: cache.py)
            return ConstantVariable(_CONSTANT_ANSWERS[fn])
        from ember.capture.variables import saved_hooks
        if fn in saved_hooks.SETTERS or fn in saved_hooks.READERS:
            return saved_hooks.call(tx, fn, args, kwargs)
        if fn is torch.use_deterministic_algorithms:
            from ember.capture.variables.global_flags import use_deterministic_algorithms
            return use_deterministic_algorithms(tx, args, kwargs)
        if fn in _REFUSED:
            if fn in (torch.autograd.grad, torch.autograd.backward):
                raise unsupported("EB0024", _REFUSED[fn])
            if fn in (torch.save, torch.load):
                raise unsupported("EB0026", _REFUSED[fn])
            raise unsupported("EB0025", _REFUSED[fn])
        from ember.capture.variables import subclass_metadata
        if fn in subclass_metadata.HAS_TORCH_FUNCTION:
            return subclass_metadata.has_torch_function_call(tx, fn, args, kwargs)
        if fn in (torch._C._is_torch_function_enabled, torch._C._get_torch_function_state) and not args and not kwargs:
            return subclass_metadata.torch_function_enabled(tx, fn)  # (torch.overrides' own check)
        if fn is torch.is_grad_enabled:
            return ConstantVariable(torch.is_grad_enabled())  # grad mode is always guarded
        if fn in (torch.no_grad, torch.enable_grad) and len(args) == 1 and not kwargs \
                and not args[0].is_constant():
            # `torch.no_grad(fn)`: the decorator form without the call (changes no state)
            from ember.capture.variables.grad_modes import GradModeWrappedFunction
            return GradModeWrappedFunction(fn is torch.enable_grad, args[0])
        if fn in (torch.no_grad, torch.enable_grad, torch.set_grad_enabled):
            from ember.capture.variables.grad_modes import GradModeVariable
            return GradModeVariable.create(tx, fn, [a.as_constant() for a in args])
        if fn is torch._C._set_grad_enabled and len(args) == 1 and not kwargs and args[0].is_constant():
            # the function form (a user context manager's __enter__/__exit__): like set_grad_enabled(b)
            from ember.capture.variables.grad_modes import GradModeVariable
            GradModeVariable.create(tx, torch.set_grad_enabled, [args[0].as_constant()])
            return ConstantVariable(None)
        if fn is _checkpoint():
            from ember.capture.variables.checkpoint import trace_checkpoint
            return trace_checkpoint(tx, args, kwargs)
        if fn is torch.cond or fn is torch.ops.higher_order.cond:  # (the operator: what eager torch.cond runs)
            from ember.capture.variables.cond import trace_cond
            return trace_cond(tx, args, kwargs)
        if fn is _associative_scan():
            from ember.capture.variables.scan import trace_associative_scan
            return trace_associative_scan(tx, args, kwargs)
        if fn in _STATE_READERS and not args and not kwargs:
            # a read of process-wide state: its value now, guarded (a change recompiles)
            key = _STATE_READERS[fn]
            from ember.capture.variables.global_flags import changed_flag
            changed, value = changed_flag(tx.output, key)
            if changed:  # set earlier in the frame: the trace knows its value
                return ConstantVariable(value)
            tx.guards.global_state(key, fn, fn(), f"torch.{fn.__name__}()")
            return ConstantVariable(fn())
        if fn is torch.tensor and len(args) == 1 and set(kwargs) <= {"dtype"} and hasattr(args[0], "items") \
                and any(type(i).__name__ == "NumpyNdarrayVariable" for i in args[0].items):
            from ember.capture.variables.numpy_bridge import tensor_of_scalars
            dtype = kwargs["dtype"].as_constant() if "dtype" in kwargs and kwargs["dtype"].is_constant() else None
            if "dtype" not in kwargs or dtype is not None:
                converted = tensor_of_scalars(tx, args[0], dtype)  # torch.tensor([a[0], a[1]])
                if converted is not None:
                    return converted
        if any(type(a).__name__ == "NumpyNdarrayVariable" for a in (*args, *kwargs.values())):
            from ember.capture.variables.numpy_bridge import torch_call_with_numpy
            converted = torch_call_with_numpy(tx, fn, args, kwargs)  # torch.from_numpy(a), torch.tensor(a)
            if converted is not None:
                return converted
            if not all(a.is_constant() for a in (*args, *kwargs.values()) if type(a).__name__ == "NumpyNdarrayVariable"):
                raise unsupported("EB0053", f"torch.{getattr(fn, '__name__', fn)} of an ndarray")
            # (a NumPy scalar argument, unspecialized: its value here, guarded)
        if fn is torch.full:  # a 0-d tensor fill value: empty + fill_ (no data-dependent read)
            from ember.capture.variables.tensor import full_with_tensor_fill
            rewritten = full_with_tensor_fill(tx, None, args, kwargs)
            if rewritten is not None:
                return rewritten
        name = getattr(fn, "__name__", "")
        module = getattr(fn, "__module__", None) or ""
        if module.startswith("torch._C._dynamo"):  # Dynamo's own C hooks (its tests' `unsupported`)
            raise unsupported("EB0027", f"{module}.{name} is the other compiler's internals (runs eagerly)")
        if module == "torch._dynamo._trace_wrapped_higher_order_op" and name == "trace_wrapped" and "fn" in kwargs:
            # `trace_wrapped(grad, fn=f)` (a backward hook's body kept for compiled autograd):
            # eager runs f(grad) under no_grad
            from ember.capture.variables.grad_modes import GradModeWrappedFunction
            rest = {k: v for k, v in kwargs.items() if k != "fn"}
            return GradModeWrappedFunction(False, kwargs["fn"]).call(tx, list(args), rest)
        if _calls_its_first_argument(fn, module, name) and args:
            # torch.compiler.nested_compile_region's call and the `wrap` operator: hints for torch's
            # compiler (reuse a region, keep a subgraph); eager calls func(*args, **kwargs), and
            # ember traces that call into the frame's graph
            return args[0].call(tx, list(args[1:]), kwargs)
        if module == "torch._dynamo.external_utils" and name == "call_backward" and args \
                and not _user_function_backward(args[0]):
            raise unsupported("EB0027", "call_backward() of a Function ember made (its AOT backward runs eagerly)")
        if module == "torch._dynamo.external_utils" and name in _EXTERNAL_HELPERS:
            # plain Python helpers a graph of torch's compiled autograd calls (``call_hook(hook,
            # grad)``, ``unwrap_maybe_dynamic_int(sizes[0])``): traced as Python
            from ember.capture.variables.functions import UserFunctionVariable
            return UserFunctionVariable(fn, self.source).call(tx, args, kwargs)
        if _is_compiler_api(module):
            # the compiler's own API (graph_break, mark_dynamic, disable, ...): never a graph op
            if name == "is_compiling":
                tx.output.observes_compiling = True
                return ConstantVariable(True)
            if name == "graph_break":
                msg = args[0].as_constant() if args and args[0].is_constant() else kwargs.get("msg")
                msg = msg.as_constant() if isinstance(msg, VariableTracker) and msg.is_constant() else msg
                raise unsupported("EB0028", "graph_break() called (a break the program asked for)" + (f": {msg}" if msg else ""))
            if name == "nonstrict_trace":  # the decorator applied in the frame (variables/nonstrict.py)
                from ember.capture.variables.nonstrict import nonstrict_of
                return nonstrict_of(args, kwargs)
            if name == "skip_frame":  # the frame (this one: a resume function, if a break came first) runs eagerly
                e = unsupported("EB0028", "skip_frame() called: the frame runs as it is")
                e.whole_frame = True
                raise e
            if name == "step_unsupported":  # the graph so far, then the rest of the frame eagerly (eager_rest)
                raise unsupported("EB0028", "step_unsupported() called: the rest of the frame runs as it is")
            from ember.capture.compile_settings import setting_context
            ctx = setting_context(fn, args, kwargs)  # (`with torch._dynamo.error_on_graph_break(b):`)
            if ctx is not None:
                return ctx
            raise unsupported("EB0027", f"{module}.{name}() inside the compiled region runs eagerly")
        if name.startswith("set_") or name.startswith("_set_"):
            raise unsupported("EB0025", f"torch.{name} changes global state")
        if fn in (torch.inference_mode, torch.autocast) or name in ("inference_mode",):
            raise unsupported("EB0027", f"torch.{name} is not supported yet")
        # (a function made at run time, `<locals>` in its name, as the EMA update that
        # torch.optim.swa_utils.get_ema_multi_avg_fn returns, cannot be named by the graph's code:
        # it is traced as Python)
        local = isinstance(fn, types.FunctionType) and "<locals>" in fn.__qualname__
        if isinstance(fn, types.FunctionType) and (local or not module.startswith(_GRAPH_OP_MODULES)) \
                and not (module.startswith("torch.optim") and "." in fn.__qualname__ and not local):
            # (an optimizer's own methods keep running as one call: their sparse and foreach paths)
            # torch's Python code outside its functional namespaces (torch.random, torch.optim's
            # functional API, context managers such as fork_rng / sdpa_kernel) reads and changes
            # process state: traced as Python, where what it does at run time is honoured
            from ember.capture.variables.functions import UserFunctionVariable
            return UserFunctionVariable(fn, self.source).call(tx, args, kwargs)
        if isinstance(fn, types.FunctionType):
            try:
                return tx.output.call_function(fn, args, kwargs)
            except Unsupported as e:
                if e.id != "EB0030":
                    raise
            # An argument no graph call can take (a generator, a user object, a module):
            # torch's Python function is traced as Python instead, as torch.compile inlines it
            # (`parameters_to_vector(m.parameters())`). The refusal came before any node was made.
            from ember.capture.variables.functions import UserFunctionVariable
            return UserFunctionVariable(fn, self.source).call(tx, args, kwargs)
        return tx.output.call_function(fn, args, kwargs)
