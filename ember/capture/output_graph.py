"""OutputGraph: the fx graph being built for one frame, and its inputs.

Tensors read from outside the frame become placeholders (one per distinct
tensor object; a tensor reached by two sources is one placeholder plus an
``is`` guard). Operations become ``call_function`` / ``call_method`` nodes whose
results are computed on fake tensors. At the end, `finish` prunes unused
placeholders and returns the GraphModule, the example inputs, and the sources
that feed each input on later calls.
"""
from __future__ import annotations

import functools
import math
import operator
import types
import weakref

import torch
import torch.fx as fx
from torch.overrides import TorchFunctionMode
from torch._subclasses.fake_tensor import (DataDependentOutputException, DynamicOutputShapeException,
                                           UnsupportedOperatorException)

from ember.exc import Unsupported
from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported
from ember.capture.variables.containers import ListVariable, TupleVariable
from ember.capture.variables.tensor import TensorVariable, subclass_result_class
from ember.config import config
from ember.capture.dynamic_dims import StaticRetry, constraints, name_violation, named_dynamic, named_dynamic_dims, \
    unbacked_dims
from ember.capture.variables.symbolic import SizeVariable, SymNodeVariable, symbolic_new_tensor, symbolic_tensor_literal
from ember.fake.convert import VIEW_REBASED, FakeContext
from ember.torch_config import (force_nn_module_property_static_shapes, force_parameter_static_shapes,
                                specialize_float, specialize_int)
from ember.capture.sources import ModuleMemberSource
from ember.capture.inplace_ops import (check_out_resizes, out_arguments, _reads_what_it_overwrites, _tensor_arguments, _write_after_layout_change,
                                       _writes_to_self_overlapping, check_inplace_cast)
from ember.capture.op_kinds import (_binds_torch_runtime, _guardable_answer, _is_tensor_op, _mask_write_needs_grad,
                                     _may_mutate, _reads_state_only)
from ember.capture.lowering import (_has_numpy_scalar, _lower, numpy_scalar_arguments,
                                    symbolic_pow_as_float)  # noqa: F401 (_lower: also imported from here)
from ember.fake.snapshot import entry_stand_in
from ember.fake.symbolic import data_dependent_reason, is_data_dependent_guard, dynamic_dims, entry_metadata, has_symbols, plain, same_metadata, shape_guard_code, symbolic_float, symbolic_int, view_bases


def _changes_state(kind, target, kwargs) -> bool:
    from ember.capture.rerun import call_changes_state
    plain = {k: v.as_constant() if v.is_constant() else v for k, v in kwargs.items()}
    return call_changes_state(kind, target, plain)


def _only_draws(kind, target, kwargs) -> bool:
    from ember.capture.rerun import only_draws
    return only_draws(kind, target, {k: v.as_constant() if v.is_constant() else v for k, v in kwargs.items()})


def _placeholder_name(source) -> str:
    """The source's name with each run of other characters as one ``_`` (``L['x']`` → ``L_x_``), as
    Dynamo names its placeholders (graph printouts compare equal)."""
    out = "".join(c if c.isascii() and c.isalnum() else "_" for c in source.name())
    while "__" in out:
        out = out.replace("__", "_")
    return out if out.strip("_") and not out[0].isdigit() else "input"


def _source_name(source) -> str:
    name = source.name  # (a property of torch's sources in 2.13, a method before)
    return name if isinstance(name, str) else name()


class OutputGraph:
    def __init__(self, fake: FakeContext, guards):
        self.fake = fake
        self.guards = guards
        self.graph = fx.Graph()
        self.input_sources: list = []       # source per placeholder, in order
        self.input_values: list = []        # the real tensors (example inputs)
        self.placeholders: list[fx.Node] = []
        self._placeholder_names: set[str] = set()  # (their targets: the forward's argument names)
        self._by_tensor: dict[int, TensorVariable] = {}
        self._tracker_by_source: dict = {}  # source -> TensorVariable of a tensor input
        self.source_memo: dict = {}
        self.module_sources: set = set()  # sources of the nn.Modules the trace read
        self.entry_grad_mode: bool | None = torch.is_grad_enabled()
        self.active_autocasts: list = []  # their trackers (see variables/autocast_breaks.py)
        self.autocast_exits: list = []  # autocast blocks entered before the frame that it left
        self.active_inference: list = []  # open torch.inference_mode trackers (variables/inference_breaks.py)
        self.active_contexts: list = []  # real autocast contexts entered for tracing   # source -> (real value, tracker), see builder.wrap
        self._location: str | None = None  # "file:line" of the instruction being traced
        self._current_frame = None  # (weakly) the frame being traced: its user stack, node_meta.stack_trace
        self.guard_lines: list = []  # (number of ShapeEnv guards when a line started, "file:line: code")
        self.submodules: dict[str, torch.nn.Module] = {}  # GraphModules the graph calls (cond branches)
        self.symbolic_inputs: list = []  # (fake or SymInt, guard expression, entry metadata, source)
        self._int_inputs: dict = {}  # source -> SymNodeVariable of a symbolic int input
        self.numpy_inputs: dict = {}  # id(array) -> (np.ndarray, tracker, source): see numpy_arrays
        self.input_versions: dict = {}  # id(fake of a tensor input) -> its version when it became one

    # -- inputs -----------------------------------------------------------------
    def add_input(self, source, real: torch.Tensor) -> TensorVariable:
        hit = self._by_tensor.get(id(real))
        if hit is not None:
            if hit.source is not None and hit.source != source:
                self.guards.same_object(source, hit.source)
                if not self.guards.pins_type(hit.source):  # (its own waits for a read: lazy_arguments)
                    self.guards.type_match(source, real)
            return hit
        if self.numpy_inputs:  # (an input over an ndarray input's memory: refused / guarded apart)
            from ember.capture.variables.numpy_arrays import guard_new_tensor_input
            guard_new_tensor_input(self, real, source)
        # Its type now (an argument of the frame: when the frame reads it, see lazy_arguments); the
        # rest of its tensor guard when the trace first uses it (see TensorVariable: a tensor only
        # passed on, or unused, is not guarded by this frame, as in torch.compile).
        type_guard = functools.partial(self.guards.type_match, source, real)
        if self.deferred_type_guards is not None:
            self.deferred_type_guards.append(type_guard)
        else:
            type_guard()
        pending = []
        try:
            fake = self._symbolic_input(source, real, pending)
            if fake is None:
                pending.append(functools.partial(self.guards.tensor_match, source, real))
                fake = self.fake.fake(real)
        except Exception as e:
            if isinstance(e, RuntimeError) and VIEW_REBASED in str(e):
                # a view (made under no_grad, by a custom Function, one of several) whose base was
                # written in place since: autograd refuses to read its metadata in any mode, so it
                # runs where the program uses it, eagerly
                raise unsupported("EB0020", "an input is a view whose base was written in place since, made "
                                  "under no_grad, by a custom autograd.Function or as one of several views "
                                  "(autograd refuses to describe it)") from None
            if torch._C._functorch.is_functorch_wrapped_tensor(real):  # (jvp's dual views, grad's leaves)
                raise unsupported("EB0020", "an input wrapped by the torch.func transform the compiled function "
                                  f"is called inside has no fake tensor ({type(e).__name__})") from None
            if type(real) in (torch.Tensor, torch.nn.Parameter) or isinstance(e, Unsupported):
                raise
            # a subclass torch cannot convert (one shadowing `size` with a class attribute, ...)
            raise unsupported("EB0020", f"a {type(real).__name__} input has no fake tensor "
                              f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
        if type(real) is torch.Tensor and real.layout is torch.strided:
            # a later call whose tensor mark_dynamic marked in a dimension this graph has static
            # (parameters, subclasses and other layouts stay static: dynamic_dims.py, their marks too)
            # (a marked dimension of size 0 or 1 is specialised, as torch does: its size guard decides)
            single = {d for d in getattr(real, "_dynamo_dynamic_indices", ()) if 0 <= d < real.dim() and real.shape[d] < 2}
            pending.append(functools.partial(self.guards.marked_dims, source, real, dynamic_dims(fake) | single))
        if self.observes_storage_offsets:
            self.guards.storage_offset(source, real)
        node = self._placeholder(source, real, fake)
        vt = TensorVariable(node, fake, source, cls=type(real), real=real, guard=functools.partial(_run_all, pending))
        vt.on_identity = functools.partial(_observe_identity, weakref.ref(self))  # (hashed: a set, a key)
        self._by_tensor[id(real)] = vt
        self._tracker_by_source[source] = vt
        return vt

    def _placeholder(self, source, real, example) -> fx.Node:
        """A new graph input, fed from ``source`` on every call."""
        name = _placeholder_name(source)
        if name in self._placeholder_names:
            # Two sources that spell the same (two modules' `weight`, reached as dict keys): fx
            # names the node uniquely, but its target is the forward's argument: one per input.
            base, n = name, 1
            while name in self._placeholder_names:
                name, n = f"{base}_{n}", n + 1
        self._placeholder_names.add(name)
        if self.placeholders:
            with self.graph.inserting_after(self.placeholders[-1]):
                node = self.graph.placeholder(name)
        else:
            first = next(iter(self.graph.nodes), None)
            if first is not None:
                with self.graph.inserting_before(first):
                    node = self.graph.placeholder(name)
            else:
                node = self.graph.placeholder(name)
        node.meta["example_value"] = example
        node.meta["source"] = source.name()
        if isinstance(example, torch.Tensor) and not example.is_inference():
            # (an inference tensor, made under torch.inference_mode, has no version counter)
            self.input_versions[id(example)] = example._version
        self.placeholders.append(node)
        self.input_sources.append(source)
        self.input_values.append(real)
        return node

    def symbolic_int(self, source, value: int | float, force: bool = False) -> SymNodeVariable | None:
        """An int or float read from outside the frame whose value changed since the frame last
        compiled (automatic dynamic), or ``force`` (a NumPy int argument's value: torch keeps those
        unspecialized from the first call): a graph input and a ShapeEnv symbol. None: a constant
        as before."""
        if self.frame_sizes is None or not self.frame_sizes.int_is_dynamic(
                source.name(), value, named_dynamic(source, value) or force and self.frame_sizes.dynamic is not False) \
                or self.fake.shape_env is None:
            return None
        hit = self._int_inputs.get(source)
        if hit is not None:
            return hit
        expr = source.expr(self.guards.scope)
        if type(value) is int and not force and specialize_int() and not named_dynamic(source, value):
            return None
        if type(value) is float:
            if specialize_float() or not self.frame_sizes.floats or value == 0.0 or not math.isfinite(value):
                # zeros, nan and inf stay constants: a sympy Float has no -0.0 (copysign, 1/v, atan2
                # would read +0.0) and no nan, and the ShapeEnv's guards cannot tell them apart
                return None
            sym = symbolic_float(self.fake.shape_env, value, expr)
            self.frame_sizes.float_symbols += 1
            # ... and so a later call's inf must not use this graph either: the ShapeEnv takes a
            # float symbol for finite (`v == inf` folds to False) and guards only `not isnan(v)`
            from ember.capture.sources import CallSource
            self.guards.equals(CallSource(math.isfinite, source, ()), True)
        else:
            sym = symbolic_int(self.fake.shape_env, value, expr)
        if not has_symbols(sym):
            return None  # 0 and 1 are specialised
        vt = SymNodeVariable(self._placeholder(source, value, sym), sym)
        vt.source = source  # (passed on unchanged: read from the source again, as a LazyGuardedConstant)
        self.symbolic_inputs.append((sym, expr, None, source))
        self._int_inputs[source] = vt
        return vt

    def _symbolic_input(self, source, real: torch.Tensor, pending: list | None = None):
        """The fake of an input with dynamic dimensions (see capture/dynamic_dims.py), its tensor
        guard without sizes and strides (the ShapeEnv's guards check those; appended to ``pending``
        when given, installed now otherwise); None: a static input."""
        if self.frame_sizes is None:
            return None
        unbacked = unbacked_dims(source, real)
        buffer = isinstance(source, ModuleMemberSource) and source.kind == "_buffers"
        # torch's force_parameter_static_shapes (and, for a torch.nn module's own parameters and
        # buffers, force_nn_module_property_static_shapes): either set False by the program
        param_static = force_parameter_static_shapes() or isinstance(source, ModuleMemberSource) \
            and source.builtin and force_nn_module_property_static_shapes()
        dims = self.frame_sizes.dims(source.name(), real, named_dynamic_dims(source, real) | unbacked, pending, buffer,
                                     param_static)
        strides = self.frame_sizes.stride_dims(source.name(), real, pending, buffer, param_static)
        if not (dims or strides) or self.fake.shape_env is None:
            return None
        expr = source.expr(self.guards.scope)
        fake = self.fake.symbolic(real, expr, dims, constraints(real, dims, self.frame_sizes.relaxed_marks),
                                  unbacked & dims, strides)
        if not (has_symbols(tuple(fake.shape)) or has_symbols(fake.stride())
                or has_symbols(fake.storage_offset())):
            return None  # every dynamic dimension had size 0 or 1 (specialised)
        if pending is not None:
            pending.append(functools.partial(self.guards.tensor_match, source, real, sizes=False))
        else:
            self.guards.tensor_match(source, real, sizes=False)
        self.symbolic_inputs.append((fake, expr, entry_metadata(fake), source))
        return fake

    @property
    def current_frame(self):
        ref = self._current_frame
        return ref() if ref is not None else None

    @current_frame.setter
    def current_frame(self, frame) -> None:
        # (weak: a translator holds its output graph; a cycle would keep the inputs alive after
        # the call until the next garbage collection, where eager frees them at once)
        self._current_frame = weakref.ref(frame) if frame is not None else None

    def stack_trace(self) -> str | None:
        """The user's stack where the trace is (``node.meta["stack_trace"]``, see node_meta)."""
        frame = self.current_frame
        if frame is None:
            return self._location
        from ember.capture.node_meta import stack_trace
        return stack_trace(frame)

    @property
    def current_location(self) -> str | None:
        return self._location

    @current_location.setter
    def current_location(self, location: str | None) -> None:
        self._location = location
        env = self.fake.shape_env
        if env is not None and location:
            self.guard_lines.append((len(env.guards), location))

    def lines_specialising(self, names: list[str]) -> list[str]:
        """The user's lines whose trace added a ShapeEnv guard on the symbol of one of the sources
        ``names`` (e.g. ``x.size()[0]``): where a dimension marked dynamic was specialised."""
        env = self.fake.shape_env
        symbols = {sym for sym, sources in env.var_to_sources.items()
                   if any(_source_name(src) in names for src in sources)}
        out = []
        for i, guard in enumerate(env.guards):
            if guard.expr.free_symbols & symbols:
                where = next((loc for n, loc in reversed(self.guard_lines) if n <= i), None)
                if where is not None and where not in out:
                    out.append(where)
        return out

    def install_shape_guards(self, shadowed: dict[str, str] | None = None) -> None:
        """The ShapeEnv's guards over the symbolic inputs (after the backend compiled the graph:
        tracing it further may have added some).

        ``shadowed``: helpers of the guard code (``torch``, ``math``) that a parameter of the frame
        shadows, and the private names bound to them: an input read through that parameter is
        read into a hoisted local first, and the guards call the helper by its private name."""
        if not self.symbolic_inputs:
            return
        # (inputs the trace never used are not guarded: see TensorVariable; their symbols appear in
        # no guard then, unless shared with a used input's, which names them)
        used = [entry for entry in self.symbolic_inputs if self.is_guarded_input(entry[3])]
        try:
            self._install_shape_guards(used, shadowed)
        except StaticRetry:
            raise
        except Exception as e:
            if len(used) == len(self.symbolic_inputs) or type(e).__name__ == "ConstraintViolationError":
                raise
            for _, _, _, source in self.symbolic_inputs:  # (a guard over an unused one's symbol: all)
                self._tracker_by_source[source].use()
            self._install_shape_guards(self.symbolic_inputs, shadowed)

    def is_guarded_input(self, source) -> bool:
        """Whether the input read from ``source`` has its guard (False: a tensor input the trace
        has not used, only passed on)."""
        vt = self._tracker_by_source.get(source)
        return vt is None or vt.is_guarded

    def _install_shape_guards(self, inputs: list, shadowed: dict[str, str] | None) -> None:
        exprs = [e for _, e, *_ in inputs]
        bare = None
        if shadowed:
            import re
            from ember.capture.sources import hoist
            bare = re.compile(r"(?<![\w.'\"])(" + "|".join(map(re.escape, shadowed)) + r")\b")
            exprs = [bare.sub(lambda m: hoist(self.guards.scope, m.group(1)), e) for e in exprs]
        fakes = []
        for fake, _, key, source in inputs:
            if key is not None and not same_metadata(self.fake.shape_env, entry_metadata(fake), key):
                # an in-place metadata op (t_(), squeeze_()) changed the fake: the guards describe
                # the input as it arrived, read from a stand-in with its entry sizes and strides
                fake = entry_stand_in(self.fake, fake, key)
                if fake is None:
                    raise StaticRetry(f"{source.name()}'s sizes changed in place during the trace")
            fakes.append(fake)
        names = [(e, src.name()) for e, (*_, src) in zip(exprs, inputs)]
        contexts = [self.fake.contexts.get(id(f)) if isinstance(f, torch.Tensor) else None for f in fakes]
        for fake, expr, name, source in view_bases(self.fake.shape_env, fakes, exprs, inputs):
            # a view input's fake base has symbols of its own (read as ``x._base.size()[i]``): a
            # guard over them (a bound check of the view in its base) needs the base as an input
            fakes.append(fake)
            exprs.append(expr)
            names.append((expr, name))
            contexts.append(None)
            self.guards.is_view(source)
        try:
            codes, provenance = shape_guard_code(self.fake.shape_env, fakes, exprs, contexts)
        except Exception as e:
            if type(e).__name__ == "ConstraintViolationError":
                name_violation(e, self)
            raise
        if bare is not None:  # (what is left bare is a helper: the inputs are read through hoisted locals)
            codes = [bare.sub(lambda m: shadowed[m.group(1)], c) for c in codes]
        self.guards.shape_env(codes, names, provenance)

    frame_sizes = None  # FrameSizes of the frame (capture/dynamic_dims.py), None: all static
    deferred_type_guards: list | None = None  # (set while lazy_arguments wraps a tensor argument)
    observes_storage_offsets = False
    observes_tensor_identity = False
    under_finally = False  # an op was traced under a `finally` body (capture/write_snapshots.py)
    undo_required = False  # ops a try may catch follow input writes: the entry must undo them
    observes_compiling = False  # the trace asked torch.compiler.is_compiling() (see torch_fn._COMPILING_QUERIES)

    def observe_tensor_identity(self) -> None:
        """The program hashes or compares by identity an input tensor (a set of tensors, a dict keyed
        by parameters): a call where two inputs are the same tensor must not reuse the graph traced
        with them distinct. One guard at the end checks all tensor inputs are distinct objects
        (inputs that were the same tensor are one input, guarded so already)."""
        self.observes_tensor_identity = True

    def observe_storage_offsets(self) -> None:
        """The program reads a ``storage_offset()``: every input's offset is guarded (tensor guards
        leave it out; a view of an input at another offset would otherwise reuse the answer)."""
        if not self.observes_storage_offsets:
            self.observes_storage_offsets = True
            for source, real in zip(self.input_sources, self.input_values):
                if not getattr(source, "made_after_guards", False):  # (a drawn random value's tensor)
                    self.guards.storage_offset(source, real)

    # -- operations ---------------------------------------------------------------
    def call_function(self, fn, args: list, kwargs: dict) -> VariableTracker:
        result = self._call("call_function", fn, args, kwargs)
        if type(result).__name__ == "TensorVariable" and args and result.fake.dim() == 0:
            from ember.capture.scalar_inputs import note_known_int
            note_known_int(self, fn, args, kwargs, result)  # (a tensor of a size expression's value)
        return result

    def call_method(self, name: str, args: list, kwargs: dict) -> VariableTracker:
        return self._call("call_method", name, args, kwargs)

    def _call(self, kind, target, args, kwargs):
        from ember.capture.caught_ops import check_call
        from ember.capture.variables.override_purity import check_pure_override
        check_call(self, args, kwargs, _describe(kind, target))
        check_pure_override([*args, *kwargs.values()], _describe(kind, target))  # (its override runs in the graph)
        if (self.__dict__.get("assumptions") or self.__dict__.get("caught_ops")) and _changes_state(kind, target, kwargs):
            if not _only_draws(kind, target, kwargs):
                from ember.capture.rerun import only_local_write
                local, draws = only_local_write(self.graph, kind, target, args, kwargs)
                if not local and self.frame_sizes is not None and not self.frame_sizes.catch_breaks:
                    self.undo_required = True  # (the entry undoes it before a rerun: capture/caught_ops.py)
                elif not local:
                    # a rerun after a failed check would repeat it (capture/assumptions.py): the graph ends here
                    raise unsupported("EB0016", f"{_describe(kind, target)} after a data-dependent check the "
                                      "graph assumed, or an op a try block may catch (a write ends the graph)")
                if draws:  # (into a tensor the graph made: a rerun makes it anew; only the RNG moved)
                    self.assumed_draws = True
            else:
                self.assumed_draws = True  # (a draw: the entry puts the RNG state back before a rerun)
        if kind == "call_function" and target in (torch.tensor, torch.as_tensor) and len(args) == 1 \
                and isinstance(args[0], SymNodeVariable) and set(kwargs) <= {"dtype", "device"}:
            # torch.tensor(float(x.size(0))) would read the size: scalar_tensor keeps it symbolic
            sym = args[0].sym
            dtype = torch.bool if isinstance(sym, torch.SymBool) else torch.int64 \
                if isinstance(sym, torch.SymInt) else torch.get_default_dtype()
            target, kwargs = torch.scalar_tensor, {"dtype": ConstantVariable(dtype), **kwargs}
        elif kind == "call_function" and target in (torch.tensor, torch.as_tensor) and len(args) == 1:
            literal = symbolic_tensor_literal(self, args[0], kwargs)
            if literal is not None:
                return literal
        elif kind == "call_method" and target == "new_tensor":
            literal = symbolic_new_tensor(self, args, kwargs)
            if literal is not None:
                return literal
        rg = kwargs.get("requires_grad")
        if rg is not None and rg.is_constant() and rg.as_constant():
            # A new leaf that requires grad: AOT graphs return fresh tensors without autograd
            # history or leaf-ness of their own, so it is made eagerly at a break (as eager makes it).
            raise unsupported("EB0021", f"{_describe(kind, target)} makes a tensor that requires grad")
        if _writes_to_self_overlapping(kind, target, args):
            # e.g. x.expand(2, 4).zero_(): eager allows it, but a functional graph cannot express
            # the write (as_strided_scatter rejects it), so it runs eagerly, outside any graph.
            raise unsupported("EB0021", f"{_describe(kind, target)} writes into a self-overlapping (expanded) tensor")
        if _reads_what_it_overwrites(self, kind, target, args):
            # `t[1] = t[:, 0]`: eager copies element by element, so what it reads depends on what it
            # already wrote; a functional graph reads the old values. Runs eagerly instead.
            raise unsupported("EB0021", f"{_describe(kind, target)} writes over memory that another of its "
                              "arguments reads (a partial overlap)")
        if _write_after_layout_change(self, target, args):
            # `v = y[:, :2]; y.t_(); v.mul_(3)` with grad: functionalization replays the write onto
            # `y` with the view chain of `v` taken on the new layout, and the backward is wrong
            # (torch.compile's too). Runs eagerly instead.
            raise unsupported("EB0021", f"{_describe(kind, target)} writes, with grad, through a view of a tensor "
                              "whose layout an in-place op (t_, transpose_, unsqueeze_...) changed")
        if _mask_write_needs_grad(kind, target, args, kwargs):
            # its backward reads the mask's data (`grad[mask]` has a data-dependent shape): no graph
            # can hold it, so it runs eagerly (torch.compile breaks there too)
            raise unsupported("EB0021", f"{_describe(kind, target)} through a boolean mask, with a value that needs "
                              "grad (its backward depends on the mask's data)")
        if _has_numpy_scalar([*args, *kwargs.values()]):
            args, kwargs = numpy_scalar_arguments(self, kind, target, args, kwargs, _describe(kind, target))
        pow_args = symbolic_pow_as_float(self, kind, target, args)
        if pow_args is not None:
            args = pow_args
        node_args, fake_args = _lower(args)
        node_kwargs, fake_kwargs = _lower(kwargs)
        state_query = False
        if kind == "call_function" and not isinstance(target, types.FunctionType) \
                and not _contains_tensor(fake_args) and not _contains_tensor(fake_kwargs) \
                and not (any(isinstance(a, SymNodeVariable) for a in args) and not _binds_torch_runtime(target)) \
                and not _is_tensor_op(target):
            # A binding of torch's runtime that takes no tensor (profiler, hooks, backends):
            # it acts on, or reads, process state. Running it at trace time would do (or read)
            # that once, not on every call.
            if not _reads_state_only(target):
                raise unsupported("EB0025", f"{_describe(kind, target)} acts on torch's process state (runs eagerly)")
            state_query = True
        if self.__dict__.get("pending_checkpoints"):
            from ember.capture.speculation import may_change_fakes, snapshot_pending
            if may_change_fakes(kind, target, kwargs):
                snapshot_pending(self)  # (a speculated region's checkpoint: fake tensors as they are now)
        outs = out_arguments(fake_kwargs, _describe(kind, target))  # (raises for a non-contiguous one)
        try:
            with self.fake.enabled():
                if kind == "call_function" and isinstance(target, types.FunctionType) \
                        and not hasattr(target, "ember_function"):
                    with _AutogradStateWatch(target):
                        result = target(*fake_args, **fake_kwargs)
                elif kind == "call_function":
                    result = target(*fake_args, **fake_kwargs)
                else:
                    result = getattr(fake_args[0], target)(*fake_args[1:], **fake_kwargs)
                check_inplace_cast(kind, target, fake_args, fake_kwargs, result)  # (int_t.mul_(1.5) raises)
        except (DataDependentOutputException, DynamicOutputShapeException) as e:
            if isinstance(e, DataDependentOutputException):
                # a 0-dim integer tensor input read as an int (a size): its value, guarded
                from ember.capture.scalar_inputs import retry_with_scalar_values
                done = retry_with_scalar_values(self, kind, target, args, kwargs)
                if done is not None:
                    return done
            raise unsupported("EB0019", f"{_describe(kind, target)} depends on tensor data "
                              f"({type(e).__name__})") from None
        except UnsupportedOperatorException as e:
            raise unsupported("EB0020", f"{_describe(kind, target)}: operator {e} has no fake implementation") from None
        except _ReadsAutogradState as e:
            raise unsupported("EB0020", f"{_describe(kind, target)} {e}") from None
        except Exception as e:
            if is_data_dependent_guard(e):
                raise unsupported("EB0018", f"{_describe(kind, target)}: {data_dependent_reason(e)}") from None
            if isinstance(e, NotImplementedError):
                # a fake implementation that refuses (a custom op's register_fake): a break, as above (not
                # an eager run of the frame for these inputs, which fullgraph=True would not see)
                raise unsupported("EB0020", f"{_describe(kind, target)}: its fake implementation raised "
                                  "NotImplementedError") from None
            failure = unsupported("EB0020", f"{_describe(kind, target)} raised {type(e).__name__} while tracing: "
                                  f"{str(e).splitlines()[0] if str(e) else ''}")
            failure.per_call = True  # these inputs' shapes/dtypes: other calls may still compile
            raise failure from None
        check_out_resizes(outs, _describe(kind, target))
        if state_query:
            # its answer now, guarded (a different answer later recompiles)
            if not _guardable_answer(result):
                raise unsupported("EB0020", f"{_describe(kind, target)} answered a {type(result).__name__}")
            shown = ", ".join([*map(repr, fake_args), *(f"{k}={v!r}" for k, v in fake_kwargs.items())])
            # (one guard per query and arguments: the key is a name in the guard code)
            self.guards.global_state(f"query_{getattr(target, '__name__', 'fn')}_{abs(hash(shown)) % 10 ** 8}",
                                     functools.partial(target, *fake_args, **fake_kwargs), result,
                                     f"{_describe(kind, target)}({shown})")
            from ember.capture.variables.builtins import wrap_constant
            return wrap_constant(result)
        bindings = None
        env = self.fake.shape_env
        if env is not None and env.pending_fresh_unbacked_symbols:
            # data-dependent values (.item(), nonzero's size) this op made: the node binds them (where
            # the runtime asserts about them go; the AOT layer traces the graph again with its own)
            from torch.fx.experimental.symbolic_shapes import (PendingUnbackedSymbolNotFound, compute_unbacked_bindings,
                                                               free_unbacked_symbols)
            try:
                bindings = compute_unbacked_bindings(env, result)  # (clears the pending list)
            except PendingUnbackedSymbolNotFound:
                if free_unbacked_symbols(result):
                    # a size made from a value the kernel read (arange(t)): out of reach
                    raise unsupported("EB0019", f"{_describe(kind, target)} makes a size from a "
                                      f"tensor's value (data-dependent)") from None
                # the kernel read a 0-d tensor's value as a Scalar argument (alpha=, full_like's
                # fill) and consumed it: nothing to bind, the node reads the value at run time
                # (torch.compile's ops_consuming_unbacked_scalars)
                bindings = None
        if not _contains_tensor(result) and has_symbols(result):
            # A size (or sizes) of a dynamic dimension: a node computes it at run time.
            node = self.graph.create_node(kind, target, tuple(node_args), dict(node_kwargs))
            if bindings:
                node.meta["unbacked_bindings"] = bindings
            return self._wrap_symbolic(node, result)
        if not _contains_tensor(result):
            result = plain(result)  # (a SymInt that is a constant: 0 * s0, a specialised size)
        scripted = self.__dict__.get("script_objects") and _script_objects_in(args, kwargs)
        if not _contains_tensor(result) and not _may_mutate(kind, target, result) and not scripted:
            # Metadata-only answer (sizes, flags): a constant under the guards (unless a tensor
            # subclass's own __torch_function__ answers for it: variables/subclass_metadata.py).
            from ember.capture.variables.builtins import wrap_constant
            from ember.capture.variables.subclass_metadata import check_metadata_call
            check_metadata_call(kind, target, args, kwargs)
            return wrap_constant(result)
        node = self.graph.create_node(kind, target, tuple(node_args), dict(node_kwargs))
        if bindings:
            node.meta["unbacked_bindings"] = bindings
        if self.current_location:
            node.meta["stack_trace"] = self.stack_trace()
        if scripted:  # an op on TorchScript objects: its non-tensor answer only under their state guards
            from ember.capture.variables.script_objects import wrap_script_result
            return wrap_script_result(self, node, result, scripted, _describe(kind, target))
        if not _contains_tensor(result):
            # A mutating op whose result is not a tensor (setitem returns None): keep the node.
            from ember.capture.variables.builtins import wrap_constant
            return wrap_constant(result)
        sub = subclass_result_class([*args, *kwargs.values()])
        if sub is not None and not sub[1] and not isinstance(result, torch.Tensor):
            # (an override decides how many tensors it returns, and what they are)
            raise unsupported("EB0031", f"{_describe(kind, target)} of a {sub[0].__name__} tensor returns "
                              "several tensors (its __torch_function__ or __torch_dispatch__ decides them)")
        out = self._wrap_result(node, result, None if sub is not None else _tensor_arguments(args, kwargs))
        if sub is not None:
            _set_subclass(out, *sub)
        return out

    def _wrap_result(self, node: fx.Node, result, arguments: dict | None = None):
        """Trackers for ``result``. A result that is a tensor argument itself (in-place ops, ``out=``,
        ``x.contiguous()``) is that argument's tracker (``arguments``: id of its fake -> tracker): in
        eager the same tensor, so its source, identity, ``.grad`` and own attributes are the argument's."""
        if arguments and isinstance(result, torch.Tensor) and id(result) in arguments:
            node.meta["example_value"] = result
            return arguments[id(result)]
        if isinstance(result, torch.Tensor) and result.layout != torch.strided:
            raise unsupported("EB0022", f"{_describe(node.op, node.target)} makes a tensor with layout {result.layout} "
                              "(sparse layouts run eagerly)")
        if isinstance(result, torch.Tensor):
            node.meta["example_value"] = result
            return TensorVariable(node, result)
        if isinstance(result, (tuple, list)):
            node.meta["example_value"] = result
            items = []
            for i, r in enumerate(result):
                if isinstance(r, torch.Tensor) or _contains_tensor(r):
                    item = self.graph.call_function(operator.getitem, (node, i))
                    items.append(self._wrap_result(item, r, arguments))
                elif has_symbols(r):
                    items.append(self._wrap_symbolic(self.graph.call_function(operator.getitem, (node, i)), r))
                else:
                    items.append(ConstantVariable(plain(r)))
            if isinstance(result, list):
                return ListVariable(items)
            t = type(result)
            return TupleVariable(items, tuple_type=None if t is tuple else t)
        raise unsupported("EB0020", f"operation returned {type(result).__name__}")

    def _wrap_symbolic(self, node: fx.Node, result):
        """Trackers for a symbolic size (SymInt/SymFloat/SymBool) or a tuple of sizes computed by
        ``node``; its constant entries stay constants."""
        node.meta["example_value"] = result
        if isinstance(result, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return SymNodeVariable(node, result)
        if isinstance(result, (tuple, list)):
            items = [self._wrap_symbolic(self.graph.call_function(operator.getitem, (node, i)), r)
                     if has_symbols(r) else ConstantVariable(plain(r)) for i, r in enumerate(result)]
            if isinstance(result, torch.Size):
                return SizeVariable(items)
            return ListVariable(items) if isinstance(result, list) else TupleVariable(items)
        raise unsupported("EB0020", f"operation returned {type(result).__name__}")

    def add_submodule(self, module: torch.nn.Module, prefix: str) -> fx.Node:
        """A ``get_attr`` node for ``module``, kept as an attribute of the finished GraphModule."""
        name = f"{prefix}_{len(self.submodules)}"
        self.submodules[name] = module
        return self.graph.get_attr(name)

    def set_grad_enabled(self, mode: bool) -> None:
        if mode == torch.is_grad_enabled():
            return  # no change (`no_grad()` under no_grad): the graph runs in this mode already
        torch._C._set_grad_enabled(mode)
        self.graph.call_function(torch._C._set_grad_enabled, (mode,))

    # -- finishing -------------------------------------------------------------------
    def has_compute(self) -> bool:
        """Whether there is a graph to compile: grad-mode toggles alone are not (graphs restore the
        mode they start in; a mode left changed is set by the entry after the graph), nor size
        arithmetic nothing reads (`assert x.shape[0] == 3` on a dynamic size: a guard decided it)."""
        from ember.capture.lowering import unused_size_arithmetic
        dead = unused_size_arithmetic(self.graph)
        return any(n.op not in ("placeholder", "output") and n.target is not torch._C._set_grad_enabled
                   and n not in dead for n in self.graph.nodes)

    def finish(self, output_nodes: list[fx.Node]) -> tuple[fx.GraphModule, list, list]:
        """Prune unused inputs; return (GraphModule, example inputs, input sources)."""
        self.graph.output(tuple(output_nodes))
        # No two tensor inputs are the same tensor (torch's NO_TENSOR_ALIASING): a call passing one
        # tensor twice recompiles (traced as one input, guarded `a is b`), as torch.compile does.
        # Parameters are left out (torch skips them: their guard would cost every module call),
        # unless the program observes tensor identity (a set of tensors, a dict keyed by them).
        for node, src in zip(self.placeholders, self.input_sources):
            if node.users and not self.is_guarded_input(src):
                # (every use of an input goes through its tracker, which guards it: this is a net)
                self._tracker_by_source[src].use()
        tensors = [src for src, real in zip(self.input_sources, self.input_values)
                   if isinstance(real, torch.Tensor) and not getattr(src, "made_after_guards", False)
                   and (self.observes_tensor_identity or not isinstance(real, torch.nn.Parameter))
                   and self.is_guarded_input(src)]
        if len(tensors) > 1:
            self.guards.all_distinct(tensors)
        from ember.capture.variables.autograd_function import drop_unused_bodies
        drop_unused_bodies(self.graph)
        toggles = [n for n in self.graph.nodes if n.target is torch._C._set_grad_enabled]
        if toggles and self.entry_grad_mode is not None:
            # A graph that changes grad mode states the mode it starts in, so it means the same
            # thing whatever mode a backend traces it under (AOT traces joint graphs with grad on).
            with self.graph.inserting_before(toggles[0]):
                self.graph.call_function(torch._C._set_grad_enabled, (self.entry_grad_mode,))
        if toggles:
            _coalesce_grad_toggles(self.graph)
        keep_sources, keep_values = [], []
        for node, src, val in zip(self.placeholders, self.input_sources, self.input_values):
            if node.users:
                keep_sources.append(src)
                keep_values.append(val)
            else:
                self.graph.erase_node(node)
        self.graph.lint()
        root = torch.nn.Module()
        for name, module in self.submodules.items():
            root.add_module(name, module)
        gm = fx.GraphModule(root, self.graph)
        self._insert_runtime_asserts(gm)
        return gm, keep_values, keep_sources

    def _insert_runtime_asserts(self, gm: fx.GraphModule) -> None:
        """Facts about data-dependent symbols learnt while tracing (``torch._check(n < 4)``, a size
        made from ``.item()`` is not negative) cannot be guards at entry: ``_assert_scalar`` nodes
        check them in the graph, right after the value exists (config.runtime_asserts)."""
        env = self.fake.shape_env
        from ember.config import config
        if env is None or not config.runtime_asserts or not any(env.deferred_runtime_asserts.values()):
            return
        from torch.fx.passes.runtime_assert import insert_deferred_runtime_asserts
        # (the pass builds an assert's expression, `Min(2, u0) >= 0`, by calling torch.sym_min and the
        # like on fx proxies, which dispatch through __torch_function__: the trace turned that off
        # for tensor subclasses, and sym_min then refused the proxy)
        with self.fake.enabled(), torch._C._EnableTorchFunction():
            insert_deferred_runtime_asserts(gm, env, "ember")
        gm.recompile()


def _run_all(steps: list) -> None:
    for step in steps:
        step()


def _coalesce_grad_toggles(graph: fx.Graph) -> None:
    """Of consecutive ``_set_grad_enabled`` nodes (no other node between them: nothing runs under
    the earlier ones) only the last one matters (``set_grad_enabled(False); set_grad_enabled(True)``)."""
    run: list[fx.Node] = []
    for node in list(graph.nodes):
        if node.op == "placeholder":
            continue
        if node.op == "call_function" and node.target is torch._C._set_grad_enabled and not node.users:
            run.append(node)
            continue
        for dead in run[:-1]:
            graph.erase_node(dead)
        run = []


class _ReadsAutogradState(Exception):
    pass


# Tensor state that fake tensors do not carry (or that a graph cannot change): a Python
# function from torch that touches it computes something else on fake tensors, e.g.
# ``clip_grad_norm_`` finds no ``.grad`` and returns 0. Such a call runs eagerly.
_STATE_ATTRIBUTES = frozenset({"grad", "data", "_version", "requires_grad", "grad_fn"})
_STATE_METHODS = frozenset({"requires_grad_", "detach_", "retain_grad", "register_hook", "backward",
                            "untyped_storage", "data_ptr", "set_", "_fix_weakref"})
_STATE_FUNCTIONS = frozenset({torch.autograd.grad, torch.autograd.backward})


class _AutogradStateWatch(TorchFunctionMode):
    """While a Python function from torch runs on fake tensors: refuse it if it reads ``.grad``,
    ``.data`` or similar, or changes autograd flags (see ``_STATE_ATTRIBUTES``)."""

    def __init__(self, target):
        super().__init__()
        self.target = target

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        owner = getattr(func, "__self__", None)
        if name in ("__get__", "__set__", "__delete__") and getattr(owner, "__name__", None) in _STATE_ATTRIBUTES:
            attr = owner.__name__
            if not (name == "__get__" and attr in ("requires_grad", "grad_fn")):  # metadata fakes carry
                raise _ReadsAutogradState(f"{'reads' if name == '__get__' else 'writes'} Tensor.{attr}")
        elif name in _STATE_METHODS or func in _STATE_FUNCTIONS:
            raise _ReadsAutogradState(f"calls {name}() (autograd state a graph cannot carry)")
        return func(*args, **(kwargs or {}))


def _set_subclass(vt, cls: type, certain: bool) -> None:
    """Give the tensors of an op's result the class torch gives them (variables/tensor.py,
    ``subclass_result_class``)."""
    if isinstance(vt, TensorVariable):
        vt.cls, vt.cls_uncertain = cls, not certain
    elif isinstance(vt, (TupleVariable, ListVariable)):
        for item in vt.items:
            _set_subclass(item, cls, certain)


def _describe(kind, target) -> str:
    if kind == "call_method":
        return f"Tensor.{target}()"
    return f"{getattr(target, '__module__', '') or ''}.{getattr(target, '__name__', target)}()".lstrip(".")


def _script_objects_in(args, kwargs) -> list:
    from ember.capture.variables.script_objects import script_objects_in
    return script_objects_in([args, kwargs])


def _contains_tensor(value) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (tuple, list)):
        return any(_contains_tensor(v) for v in value)
    if isinstance(value, dict):
        return any(_contains_tensor(v) for v in value.values())
    return False


def _observe_identity(graph_ref) -> None:
    """(Weakly: a tracker must not keep its output graph, and so every input, alive.)"""
    graph = graph_ref()
    if graph is not None:
        graph.observes_tensor_identity = True
