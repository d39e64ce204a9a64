"""TensorVariable: a tensor as the interpreter sees it — a fake tensor and an fx node.

The fake tensor answers every metadata question at trace time (shape, dtype,
strides, requires_grad); those answers are constants in the graph, which is
sound because the tensor guards of the graph's inputs pin that metadata down.
Operations on tensors become fx nodes; in-place operations mutate the fake
tensor too, so later questions see the new metadata.
"""
from __future__ import annotations

import collections

import functools
import operator

import torch

from ember.capture.variables.base import is_none, ConstantVariable, VariableTracker, unsupported
from ember.fake.symbolic import has_symbols, plain, scalar_outputs_captured
from ember.fake.snapshot import version_of
from ember.torch_config import capture_scalar_outputs

_INT_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)

# Tensor methods whose results depend on data or that act outside the graph.
_BREAKING_METHODS = {
    "item": "Tensor.item() reads a tensor's data",
    "tolist": "Tensor.tolist() reads a tensor's data",
    "numpy": "Tensor.numpy() leaves torch",
    "__bool__": "bool() of a tensor reads its data",
    "__int__": "int() of a tensor reads its data",
    "__float__": "float() of a tensor reads its data",
    "__index__": "using a tensor as an index reads its data",
    "backward": "Tensor.backward() inside the compiled region",
    "register_hook": "tensor hooks",
    "retain_grad": "Tensor.retain_grad()",
    "data_ptr": "Tensor.data_ptr()",
    "untyped_storage": "tensor storage access",
    "storage": "tensor storage access",
    "__setstate__": "Tensor.__setstate__",
    "set_": "Tensor.set_()",
    "__reduce_ex__": "pickling a tensor", "__reduce__": "pickling a tensor", "__getstate__": "pickling a tensor",
    "_typed_storage": "tensor storage access", "__array__": "Tensor.__array__() leaves torch",
    "__dlpack__": "Tensor.__dlpack__() leaves torch",
}

# Attributes that are tensors (computed by a property): recorded as getattr nodes.
_TENSOR_PROPERTIES = {"T", "mT", "H", "mH", "real", "imag"}


# Tensor queries whose answer is the real input's, not its fake's (a fresh tensor): read from the
# real tensor and guarded (torch.compile answers them the same way: a view passed after a plain
# tensor, a shared-memory tensor, a non-leaf that retains its grad)
_REAL_ONLY_QUERIES = frozenset({"_is_view", "is_shared", "retains_grad"})


def use_tensors(*vts) -> tuple:
    """``vts``, each tensor among them now used (guarded: see TensorVariable)."""
    for vt in vts:
        if isinstance(vt, TensorVariable):
            vt.use()
    return vts


class TensorVariable(VariableTracker):
    """A tensor of the trace. One read from outside the frame (a graph input) may come with
    ``guard``: what installs its tensor guard (dtype, device, sizes, strides, requires_grad...),
    run the first time the trace uses the tensor, i.e. reads ``node``, ``fake`` or ``real`` (an op,
    a metadata read, a method) or its type. Until then only its type is guarded (at entry: see
    ``OutputGraph.add_input``), and a tensor that is only passed on (stored, handed to a graph
    break's resume function, unused) adds no guard, as torch.compile's lazy trackers: a call whose
    such tensor changes dtype or size does not recompile a graph that never depended on it.
    Code that passes a tensor on without depending on it reads ``raw_node`` / ``is_guarded``."""

    __slots__ = ("_node", "_fake", "source", "cls", "_real", "cls_uncertain", "_guard")

    def __init__(self, node: torch.fx.Node, fake: torch.Tensor, source=None, cls: type = torch.Tensor,
                 real: torch.Tensor | None = None, cls_uncertain: bool = False, guard=None):
        self._node = node
        self._fake = fake
        self.source = source
        self.cls = cls
        self._real = real  # the real tensor, for graph inputs (their .grad can be read and assigned)
        # The result of an op on a tensor subclass whose own __torch_function__ decides what it
        # returns: its class is known only at run time (see subclass_result_class).
        self.cls_uncertain = cls_uncertain
        self._guard = guard

    def use(self) -> "TensorVariable":
        """Install the tensor guard, if still pending (the trace now depends on the tensor)."""
        guard = self._guard
        if guard is not None:
            self._guard = None
            guard()
        return self

    @property
    def is_guarded(self) -> bool:
        return self._guard is None

    @property
    def raw_node(self) -> torch.fx.Node:
        """The fx node, without counting as a use (for code that only passes the tensor on)."""
        return self._node

    @property
    def node(self) -> torch.fx.Node:
        if self._guard is not None:
            self.use()
        return self._node

    @node.setter
    def node(self, value) -> None:
        self.use()
        self._node = value

    @property
    def fake(self) -> torch.Tensor:
        if self._guard is not None:
            self.use()
        return self._fake

    @fake.setter
    def fake(self, value) -> None:
        self.use()
        self._fake = value

    @property
    def real(self) -> torch.Tensor | None:
        if self._guard is not None:
            self.use()
        return self._real

    @real.setter
    def real(self, value) -> None:
        self.use()
        self._real = value

    def python_type(self):
        self.use()  # (its type is guarded at entry; torch.compile's trackers count this as a use)
        if self.cls_uncertain:
            raise unsupported("EB0031", f"the type of a tensor computed through {self.cls.__name__}."
                              "__torch_function__ (its class is decided at run time)")
        return self.cls

    def describe(self):
        return f"Tensor({self._node.name}: {list(self._fake.shape)} {self._fake.dtype})"  # (not a use)

    def truth(self, tx):
        from ember.capture.variables.tensor_truth import raise_ambiguous_truth
        raise_ambiguous_truth(self.fake if self.python_type() in (torch.Tensor, torch.nn.Parameter) else None)
        raise unsupported("EB0016", "data-dependent branch: the truth value of a tensor depends on its data")

    def hash_key(self):
        observe = getattr(self, "on_identity", None)
        if observe is not None:
            observe()
        return ("__tensor__", id(self.__dict__.get("rebound_from", self.fake)))

    def _own_attribute(self, tx, name):
        """An attribute the fake tensor lacks, of a real input tensor: its instance ``__dict__`` (read
        and guarded by its source), else absent (guarded: a later assignment must recompile)."""
        from ember.capture.guards import on_mro
        from ember.capture.variables.objects import MissingAttribute, raw_attribute
        real = self.real
        own = raw_attribute(real, "__dict__")
        if isinstance(own, dict) and name in own:
            if self.source is None:
                raise unsupported("EB0031", f"attribute {name!r} of a tensor ember cannot name")
            from ember.capture.builder import wrap
            from ember.capture.sources import AttrSource
            return wrap(tx, own[name], AttrSource(self.source, name))
        if on_mro(type(real), name):
            raise unsupported("EB0031", f"attribute {name!r} of {type(real).__name__}")
        if self.source is not None:
            tx.guards.no_attribute(self.source, real, name)
        raise MissingAttribute(f"'{self.python_type().__name__}' object has no attribute '{name}'")

    def _subclass_attribute(self, tx, name):
        """``t.name`` where the tensor's subclass defines ``name`` (a method shadowing Tensor's
        included): what the class holds, bound to the tensor."""
        import inspect
        import types
        cls = self.python_type()  # (breaks when the class is known only at run time)
        raw = inspect.getattr_static(cls, name)
        from ember.capture.variables.classes import ClassVariable
        from ember.capture.variables.functions import UserFunctionVariable, UserMethodVariable
        if isinstance(raw, types.FunctionType):
            fn = ClassVariable(cls).getattr(tx, name)  # (its identity guarded)
            return UserMethodVariable(fn, self) if isinstance(fn, UserFunctionVariable) else fn
        if isinstance(raw, (staticmethod, classmethod)):
            return ClassVariable(cls).getattr(tx, name)
        if isinstance(raw, property) and isinstance(raw.fget, types.FunctionType):  # (a setter or not: a read)
            return UserFunctionVariable(raw.fget).call(tx, [self], {})
        if not hasattr(type(raw), "__get__"):  # a plain value on the class (`scale = 3`)
            return self._class_value(tx, cls, name)
        raise unsupported("EB0031", f"attribute {name!r} of {cls.__name__}")

    def _class_value(self, tx, cls, name):
        """A plain value the subclass holds: the tensor's own ``__dict__`` entry shadows it (one the
        frame assigned, or an input's, read and guarded), else the class's (guarded by the class
        read), with the input's ``__dict__`` guarded not to gain the name."""
        from ember.capture.variables.classes import ClassVariable
        pending = tx.side_effects.load_attr(self._attribute_owner(), name)
        if pending is not None:
            return pending
        if self.real is not None:
            from ember.capture.variables.objects import raw_attribute
            own = raw_attribute(self.real, "__dict__")
            if isinstance(own, dict) and name in own:
                return self._own_attribute(tx, name)
            if self.source is None:
                raise unsupported("EB0031", f"attribute {name!r} of a tensor ember cannot name")
            from ember.capture.sources import AttrSource
            tx.guards.not_in_dict(AttrSource(self.source, "__dict__"), name)
        return ClassVariable(cls).getattr(tx, name)

    def getattr(self, tx, name):
        if name == "__class__":  # (the fake's would be FakeTensor)
            from ember.capture.variables.objects import ClassVariable
            return ClassVariable(self.python_type())
        check_data_not_replaced(self)
        if not hasattr(torch.Tensor, name):
            pending = tx.side_effects.load_attr(self._attribute_owner(), name)
            if pending is not None:  # `t.tag = ...` earlier in the frame
                return pending
        if name in _TENSOR_PROPERTIES:
            return tx.output.call_function(getattr, [self, ConstantVariable(name)], {})
        if name == "grad":
            if self.real is not None and self.source is not None:
                from ember.capture.builder import wrap
                from ember.capture.sources import AttrSource
                pending = tx.side_effects.load_attr(self.real, "grad")
                if pending is not None:
                    return pending
                return wrap(tx, self.real.grad, AttrSource(self.source, "grad"))
            if self.real is None and self.fake.grad_fn is None:
                # a leaf made in the frame: only backward() or a `.grad =` (both run eagerly, at a
                # break, after which it is an input) could have given it a grad
                return ConstantVariable(None)
            raise unsupported("EB0024", "reading .grad of a tensor computed inside the compiled region")
        if name == "data":
            # A detached alias sharing storage with a version counter of its own, as eager's .data
            # (`x.data.add_(1)` does not invalidate what a backward saved of x; `detach` would: the
            # AOT layer applies such writes without a version bump, see ember/aot/data_writes.py)
            from ember.capture.guards import dispatches_torch_function
            if dispatches_torch_function(self.cls):
                # (on a subclass, eager's read goes through its __torch_function__, which gives the
                # result its class: the graph reads the attribute the same way)
                return tx.output.call_function(getattr, [self, ConstantVariable("data")], {})
            return tx.output.call_function(torch._C._autograd._get_data_attr, [self], {})
        if name in ("_version", "_base"):
            raise unsupported("EB0031", f"Tensor.{name}")
        if name == "retains_grad" and self._real_input():
            return ConstantVariable(self._real_query(tx, name))
        if name in ("is_leaf", "grad_fn") and self._real_input():
            # The fake of an input is a leaf even when the input is not (a non-leaf input that
            # requires grad): its leafness is the real tensor's, guarded (an in-place op of the trace
            # can only make a leaf a non-leaf, which the fake shows).
            from ember.capture.sources import AttrSource
            real_leaf = self.real.is_leaf
            tx.guards.equals(AttrSource(self.source, "is_leaf"), real_leaf)
            if not real_leaf:
                if name == "is_leaf":
                    return ConstantVariable(False)
                raise unsupported("EB0024", "grad_fn of an input that is not a leaf")
        if name == "grad_fn":
            from ember.capture.variables.autograd_function import grad_fn_variable
            return grad_fn_variable(self.fake.grad_fn)
        if user_defines(self.cls, name):
            return self._subclass_attribute(tx, name)
        if name == "nbytes" and has_symbols(tuple(self.fake.shape)):
            # (the fake refuses numel() of symbolic sizes: numel() * itemsize, kept symbolic)
            numel = self.call_method(tx, "numel", [], {})
            return tx.binary_op(operator.mul, numel, ConstantVariable(self.fake.element_size()))
        if name == "__dict__":  # (the fake's own would show ember's internals)
            raise unsupported("EB0031", "Tensor.__dict__ (the tensor's own attributes)")
        try:
            if not hasattr(self.cls, name) and type(self._fake).__name__ == "FakeTensor":
                raise AttributeError(name)  # (FakeTensor's own: fake_mode, constant, ...)
            attr = getattr(self.fake, name)
        except AttributeError:
            from ember.capture.variables.objects import MissingAttribute
            if self.real is not None:
                return self._own_attribute(tx, name)  # e.g. `param.tag = ...` set by the program
            raise MissingAttribute(f"'{self.python_type().__name__}' object has no attribute '{name}'") from None
        if callable(attr) and not isinstance(attr, (torch.Tensor, torch.Size)):
            return TensorMethodVariable(self, name)
        if isinstance(attr, torch.Tensor):
            raise unsupported("EB0031", f"tensor-valued attribute Tensor.{name}")
        getter = getattr(getattr(torch.Tensor, name, None), "__get__", None)
        if getter is not None and not has_symbols(attr):
            # (a subclass's __torch_function__ may answer for Tensor.ndim, .shape, ...)
            from ember.capture.variables.subclass_metadata import check_metadata_read
            check_metadata_read(self, getter, what=f"Tensor.{name}")
        if has_symbols(attr):  # x.shape of a dynamic input: computed by the graph
            from ember.capture.variables.subclass_metadata import check_certain
            check_certain(self, f"Tensor.{name}")
            return tx.output.call_function(getattr, [self, ConstantVariable(name)], {})
        return ConstantVariable(plain(attr))

    def _real_input(self) -> bool:
        """A graph input read from the frame (its real tensor and source known)."""
        return self.real is not None and self.source is not None and self.node.op == "placeholder"

    def reads_input(self) -> bool:
        """The frame's value is the input object itself (read by its source when passed on or
        returned): a graph input, or one whose ``.data`` the frame assigned (see `_set_data`)."""
        return self.source is not None and (self._node.op == "placeholder" or "rebound_from" in self.__dict__)

    def _input_scalar(self, max_numel: int = 0) -> bool:
        """A CPU int/float input the trace has not written, 0-d (or, with ``max_numel``, with at most
        that many elements): its values can be read with the guards, like scalar arguments."""
        real = self.real
        return (self.source is not None and real is not None and self.node.op == "placeholder"
                and type(real) in (torch.Tensor, torch.nn.Parameter)
                and (real.dim() == 0 if not max_numel else real.numel() <= max_numel)
                and real.device.type == "cpu" and real.layout is torch.strided
                and (real.dtype.is_floating_point or real.dtype in _INT_DTYPES) and not real.is_complex()
                and not self.fake.is_inference() and self.fake._version == 0)  # (views share the counter: no write so far)

    def setattr(self, tx, name, value):
        if name == "data" and self.real is not None and self.reads_input() and isinstance(value, TensorVariable):
            return self._set_data(tx, value)
        if name == "grad" and self.real is not None and self.source is not None:
            if not (isinstance(value, TensorVariable) or is_none(value)):
                raise unsupported("EB0024", f"assigning {value.describe()} to Tensor.grad")
            tx.side_effects.store_attr(self, self.real, "grad", value)  # replayed after the graph
            return
        if not name.startswith("__") and not hasattr(torch.Tensor, name) \
                and not hasattr(self.python_type(), name) and (self.real is None or self.source is not None) \
                and self.python_type().__setattr__ is torch.Tensor.__setattr__:
            # `t.tag = ...`: a plain attribute in the tensor's __dict__, set on the real tensor (an
            # input, or the graph's output for one computed here) after the graph, as other
            # attribute writes; reads in the frame see it
            tx.side_effects.store_attr(self, self._attribute_owner(), name, value, graph_value=self.real is None)
            return
        super().setattr(tx, name, value)

    def _set_data(self, tx, value):
        """``x.data = v`` on an input: replayed after the graph (``setattr(x, "data", ...)``, so the
        input keeps its identity, autograd metadata and version counter as in eager), in program
        order with the other side effects.

        When ``x`` does not require grad, the rest of the frame goes on tracing: from here on the
        graph sees ``x`` as ``v.detach()`` (an alias of ``v``'s storage, with ``v``'s metadata and no
        autograd history, as ``x`` has in eager), and the replay gives ``x`` the final value of that
        alias (what the graph wrote through ``x`` or ``v`` since included). This tracker is the
        only one of the input (`OutputGraph.add_input` makes one per tensor), so it is re-pointed
        in place; its source, identity and hash stay those of the input. A tensor that requires
        grad would have to stay a leaf of the new shape: any later use of it in the frame is a
        graph break there (returning it, or comparing its identity, is fine)."""
        check_data_not_replaced(self)
        check_data_not_replaced(value)
        if tx.trace.checkpoints:
            raise unsupported("EB0032", "assigning Tensor.data inside a region traced speculatively")
        if torch._C._functorch.peek_interpreter_stack() is not None:
            _data_assignment_in_transform(self.real, value)
        if self.real.layout is not torch.strided or value.fake.layout is not torch.strided \
                or value.fake.device != self.fake.device or type(value.fake) is not type(self.fake):
            raise unsupported("EB0032", f"assigning {value.describe()} to the .data of {self.describe()}")
        if self.fake.requires_grad or self.real.requires_grad:
            if _same_alias(self.fake, value.fake):
                return  # `w.data += d`: `w.data = <w's own data alias>` changes nothing in eager
            if "rebound_from" in self.__dict__:
                raise unsupported("EB0032", f"assigning the .data of {self.describe()} twice")
            tx.side_effects.store_attr(self, self.real, "data", value)
            self.fake.__dict__["_ember_data_replaced"] = True
            return
        # (as eager's .data: an alias with a version counter of its own, so the frame's writes
        # through x do not count as writes of v; they count for x, see `DataAssignment`)
        alias = tx.output.call_function(torch._C._autograd._get_data_attr, [value], {})
        aliases = self.__dict__.setdefault("data_aliases", [])
        aliases.append(alias.fake)
        # (one replay per tensor: the last value, with the writes through every alias so far)
        tx.side_effects.store_attr(self, self.real, "data", alias, via=DataAssignment(list(aliases)))
        self.__dict__.setdefault("rebound_from", self.fake)
        self.node, self.fake = alias.node, alias.fake

    def _attribute_owner(self):
        """The object attribute writes on this tensor are recorded against: the real input, or the
        fake tensor of one computed in the graph (the same for every tracker of that tensor)."""
        return self.real if self.real is not None else self.fake

    def call_method(self, tx, name, args, kwargs):
        check_data_not_replaced(self)
        if name == "item" and not args and not kwargs and self._input_scalar():
            # a 0-d CPU input the trace has not written: its value is read with the guards, as a
            # scalar argument would be (a constant, a symbol once it changes between calls)
            from ember.capture.builder import wrap
            from ember.capture.sources import CallSource
            return wrap(tx, self.real.item(), CallSource(torch.Tensor.item, self.source, ()))
        if name == "tolist" and not args and not kwargs and self._input_scalar(max_numel=16):
            # a small input's values, each read with the guards like item() of a 0-d input
            from ember.capture.builder import wrap
            from ember.capture.sources import CallSource
            from ember.capture.variables.containers import ListVariable
            real = self.real

            def build(index):
                if len(index) == real.dim():
                    return wrap(tx, real[index].item(), CallSource(tensor_element, self.source, index))
                return ListVariable([build(index + (i,)) for i in range(real.shape[len(index)])])
            return build(())
        if name in ("item", "__int__", "__index__") and not args and not kwargs:
            from ember.capture.scalar_inputs import known_int
            known = known_int(self)  # (a tensor of a size expression's value: the expression)
            if known is not None:
                return known
        if name in ("item", "tolist") and not args and not kwargs and self._unbacked_scalars(tx) \
                and (name == "item" or capture_scalar_outputs() or not self.fake.is_floating_point()):
            # (under fullgraph alone, as torch: .tolist() of a float tensor stays unsupported)
            # config.capture_scalar_outputs: the value is an unbacked symbol of the graph (a branch
            # on it breaks; passing it on to ops or out of the frame does not)
            if name == "item":
                return tx.output.call_method("item", [self], {})
            return self._tolist(tx)
        if name == "is_set_to":
            # (a fake's own answer is always False) the same tracker: True; two tensors: whether they
            # share memory may differ between calls with nothing guarding it (two views of one
            # input base, then two separate tensors): eager answers it at a break
            if len(args) == 1 and not kwargs and args[0] is self:
                return ConstantVariable(True)
            raise unsupported("EB0020", "Tensor.is_set_to() of two tensors (whether they share memory)")
        if name in _REAL_ONLY_QUERIES and not args and not kwargs and self._real_input():
            return ConstantVariable(self._real_query(tx, name))
        if name == "numpy":  # an ndarray sharing the tensor's memory, traced as torch._numpy
            from ember.capture.variables.numpy_bridge import tensor_numpy
            return tensor_numpy(tx, self, args, kwargs)
        if name in ("register_hook", "register_post_accumulate_grad_hook"):
            from ember.capture.variables.tensor_hooks import register_tensor_hook
            return register_tensor_hook(tx, self, name, args, kwargs)
        if name in _BREAKING_METHODS:
            if name in ("item", "tolist", "__int__", "__float__", "__index__"):
                raise unsupported("EB0017", _BREAKING_METHODS[name])
            if name == "__bool__":
                raise unsupported("EB0016", _BREAKING_METHODS[name])
            if name in ("backward", "register_hook", "retain_grad"):
                raise unsupported("EB0024", _BREAKING_METHODS[name])
            raise unsupported("EB0023", _BREAKING_METHODS[name])
        if name == "__len__":
            from ember.capture.variables.subclass_metadata import check_metadata_read
            check_metadata_read(self, torch.Tensor.__len__, what="len()")  # (a subclass's override answers it)
            if not self.fake.dim():
                from ember.exc import PythonException
                raise PythonException(TypeError("len() of a 0-d tensor"))
            if has_symbols(self.fake.shape[0]):
                return tx.output.call_method("size", [self, ConstantVariable(0)], {})
            return ConstantVariable(plain(len(self.fake)))
        if name == "storage_offset":
            read = _input_storage_offset(tx, self, args, kwargs)
            if read is not None:  # an input's own offset: a value read from it, as an int argument
                return read
            tx.output.observe_storage_offsets()
        if name == "__deepcopy__":  # (the copy module traced as a frame of its own)
            from ember.capture.variables.copying import deepcopy_tensor
            return deepcopy_tensor(tx, self, {})
        if name in ("requires_grad_", "detach_"):
            return self._autograd_flag_change(tx, name, args, kwargs)
        if name == "new_full":
            rewritten = full_with_tensor_fill(tx, self, args, kwargs)
            if rewritten is not None:
                return rewritten
        if name == "as_subclass" and len(args) == 1 and args[0].is_constant() and args[0].as_constant() is torch.Tensor:
            from ember.capture.variables.subclass_metadata import as_subclass_call
            return as_subclass_call(tx, self, args, kwargs)
        if name in _TENSOR_SCALAR_KWARG:
            rewritten = _tensor_scalar_rewrite(tx, self, name, args, kwargs)
            if rewritten is not None:
                return rewritten
        return tx.output.call_method(name, [self, *args], kwargs)

    def _unbacked_scalars(self, tx) -> bool:
        fake = self.fake
        return (scalar_outputs_captured() and tx.output.fake.shape_env is not None
                and type(fake).__name__ == "FakeTensor" and fake.layout is torch.strided
                and not fake.is_complex() and fake.dtype is not torch.bfloat16 and fake.dtype is not torch.float16
                and not has_symbols(fake.shape))

    def _real_query(self, tx, name: str) -> bool:
        """The input tensor's answer to a query its fake cannot give (see _REAL_ONLY_QUERIES),
        guarded: the fake of an input is a fresh tensor, not a view, not shared, not retaining."""
        from ember.capture.sources import AttrSource, CallSource
        if name == "retains_grad":  # (a property)
            value = self.real.retains_grad
            tx.guards.equals(AttrSource(self.source, name), value)
        else:
            value = getattr(self.real, name)()
            tx.guards.equals(CallSource(getattr(torch.Tensor, name), self.source, ()), value)
        return value

    def _input_is_view(self, tx) -> bool:
        return self._real_query(tx, "_is_view")

    def _tolist(self, tx):
        """``t.tolist()``: nested lists of ``t[i]...item()``, one unbacked symbol per element."""
        from ember.capture.variables.containers import ListVariable

        def build(t, shape):
            if not shape:
                return tx.output.call_method("item", [t], {})
            return ListVariable([build(tx.output.call_function(operator.getitem, [t, ConstantVariable(i)], {}),
                                       shape[1:]) for i in range(shape[0])])
        return build(self, tuple(self.fake.shape))

    def _autograd_flag_change(self, tx, name, args, kwargs):
        """``requires_grad_`` / ``detach_``: a no-op stays out of the graph; a real change breaks.

        A functional graph cannot express a tensor *becoming* a leaf that requires grad
        (or losing its autograd history): its outputs' grad_fn and the caller's tensor
        would not match eager. So the call runs eagerly at a graph break (like torch.compile),
        unless it changes nothing (``p.grad.requires_grad_(False)`` in ``zero_grad``).
        """
        fake = self.fake
        if name == "requires_grad_":
            flag = args[0] if args else kwargs.get("requires_grad", ConstantVariable(True))
            if flag.is_constant() and bool(flag.as_constant()) == fake.requires_grad and (
                    not fake.requires_grad or fake.is_leaf):
                return self
            raise unsupported("EB0024", "Tensor.requires_grad_() changes autograd metadata (runs eagerly at a graph "
                              "break); for a new leaf made from a computed tensor, call it on `.detach()` "
                              "outside the compiled function")
        if not args and not kwargs and not fake.requires_grad and fake.grad_fn is None and not fake._is_view() \
                and not (self._real_input() and self._input_is_view(tx)):  # (eager refuses a view)
            return self
        if not args and not kwargs and self.real is None and not fake._is_view() and fake.grad_fn is not None:
            # a tensor the graph computes (not a view): detached in place by the graph, as eager does;
            # what was computed from it before keeps its history (the fake shows the change)
            return tx.output.call_method("detach_", [self], {})
        raise unsupported("EB0024", "Tensor.detach_() changes autograd metadata (runs eagerly)")

    def unpack(self, tx):
        from ember.capture.variables.subclass_metadata import overrides_torch_function
        if overrides_torch_function(self.cls) or self.cls_uncertain:
            # (eager iterates over `self.unbind(0)` through the override, which decides what the
            # items are, and how many)
            raise unsupported("EB0031", f"iteration over a {self.cls.__name__} tensor (its __torch_function__ "
                              "answers the unbind)")
        if self.fake.dim() == 0:
            raise unsupported("EB0034", "iteration over a 0-d tensor")
        return [tx.output.call_function(operator.getitem, [self, ConstantVariable(i)], {})
                for i in range(self.fake.shape[0])]


def _data_assignment_in_transform(real: torch.Tensor, value) -> None:
    """``x.data = v`` under a functorch transform: eager refuses it under ``grad`` (whatever the
    tensors) and under ``vmap`` for batched tensors, with an error the program may catch. It is
    raised here as eager raises it, found by trying the assignment on scratch tensors of the same
    kind; ``functionalize``'s tensors take it."""
    from ember.exc import PythonException
    functorch = torch._C._functorch

    def scratch(t):
        if t is not None and functorch.is_batchedtensor(t):
            return functorch._add_batch_dim(torch.empty(1, 0), 0, functorch.maybe_get_level(t))
        return torch.empty(0)
    try:
        scratch(real).data = scratch(value.real)
    except RuntimeError as e:
        raise PythonException(RuntimeError(*e.args)) from None
    for t in (real, value.real if value.real is not None else value.fake):
        if functorch.is_functorch_wrapped_tensor(t) and not torch._is_functional_tensor(t) \
                and not functorch.is_batchedtensor(t):
            raise unsupported("EB0032", "assigning the .data of a tensor wrapped by a functorch transform")
    if value.real is None:  # (what it would wrap is decided at run time)
        raise unsupported("EB0032", "assigning a tensor computed under a functorch transform to .data")


class DataAssignment:
    """How the replay of ``x.data = v`` is made (`TensorVariable._set_data`): ``x.data = alias``,
    then ``x``'s version counter moved on by the writes the frame made through ``x`` since (eager
    counts them on ``x``'s own counter; the graph made them through the aliases, whose fake
    tensors counted them by the end of the trace)."""

    def __init__(self, aliases: list):
        self.aliases = aliases

    def final_setter(self):
        writes = sum(version_of(a) for a in self.aliases if not a.is_inference())
        return functools.partial(assign_data, writes=writes) if writes else assign_data


def assign_data(x: torch.Tensor, name: str, value: torch.Tensor, writes: int = 0) -> None:
    x.data = value
    if writes:
        torch._C._autograd._unsafe_set_version_counter((x,), (x._version + writes,))


def _same_alias(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``b`` views exactly what ``a`` does (same storage, dtype, offset, sizes, strides):
    ``a.data = b`` then keeps ``a``'s values, metadata and version counter."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true as known
    return (a.untyped_storage()._cdata == b.untyped_storage()._cdata and a.dtype == b.dtype
            and a.dim() == b.dim() and known(a.storage_offset() == b.storage_offset())
            and all(known(x == y) for x, y in zip(a.shape, b.shape))
            and all(known(x == y) for x, y in zip(a.stride(), b.stride()))
            and a.is_conj() == b.is_conj() and a.is_neg() == b.is_neg())


def check_data_not_replaced(vt: TensorVariable) -> None:
    """A break where the frame uses a tensor whose ``.data`` it assigned (see `_set_data`)."""
    if vt.fake.__dict__.get("_ember_data_replaced"):
        raise unsupported("EB0032", f"using {vt.describe()} after assigning its .data in the frame (the "
                          "assignment is made after the graph; the rest runs eagerly)")


def tensor_element(t: torch.Tensor, *index: int):
    """``t[index].item()``: an element of a small input tensor, read by its guards."""
    return t[index].item()


class TensorMethodVariable(VariableTracker):
    """A bound method of a traced tensor, e.g. the ``x.view`` in ``x.view(2, 3)``."""

    def __init__(self, tensor: TensorVariable, name: str):
        self.tensor = tensor
        self.name = name

    def describe(self):
        return f"Tensor.{self.name}"

    def python_type(self):
        return type(getattr(torch.Tensor, self.name, None))

    def call(self, tx, args, kwargs):
        return self.tensor.call_method(tx, self.name, args, kwargs)

    def truth(self, tx):
        return True


_TORCH_TENSOR_CLASSES = (torch.Tensor, torch._C.TensorBase)


def user_defines(cls: type, name: str) -> bool:
    """Whether a tensor subclass (not torch's own Parameter) defines ``name`` above torch.Tensor:
    then ``t.name`` is the subclass's, not what a fake tensor has."""
    if cls is torch.Tensor or cls is torch.nn.Parameter or name in ("__torch_function__", "__torch_dispatch__"):
        return False
    for k in cls.__mro__:
        if k in _TORCH_TENSOR_CLASSES:
            return False
        if name in k.__dict__ and not (k.__module__ or "").startswith("torch."):
            return True
    return False


def tensor_trackers(values):
    """The tensor trackers among ``values`` and inside the lists, tuples and dicts (Python ones or
    their trackers) they hold, outer ones first, left to right."""
    queue = collections.deque(values)
    while queue:
        v = queue.popleft()
        if isinstance(v, TensorVariable):
            yield v
        elif isinstance(v, (list, tuple)):
            queue.extend(v)
        elif isinstance(v, dict):
            queue.extend(v.values())
        elif type(v).__name__ in ("ListVariable", "TupleVariable"):
            queue.extend(v.items)
        elif type(v).__name__ in ("DictVariable", "LazyDictVariable"):
            queue.extend(v.items.values())


def subclass_result_class(values) -> tuple[type, bool] | None:
    """The class torch gives the tensors an op returns when its arguments (trackers, in lists,
    tuples and dicts) include a tensor subclass with a ``__torch_function__``, and whether that is
    certain: ``(cls, True)`` for torch's default ``Tensor.__torch_function__`` (it converts every
    tensor result to the most derived subclass among the arguments), ``(cls, False)`` when the
    subclass overrides it (the override decides at run time). None: plain tensors."""
    found: list[type] = []
    dispatching: type | None = None
    for v in tensor_trackers(values):
        c = v.cls
        if c is torch.Tensor or c is torch.nn.Parameter or c in found:
            continue
        if getattr(c, "__torch_function__", None) is not torch._C._disabled_torch_function_impl:
            found.append(c)
        elif getattr(c, "__torch_dispatch__", None) is not torch._C._disabled_torch_dispatch_impl:
            dispatching = dispatching or c
    if dispatching is not None:
        # (a wrapper subclass's __torch_dispatch__ decides at run time what each aten op returns)
        return dispatching, False
    if not found:
        return None
    # torch tries subclasses before their bases, otherwise left to right
    winner = next((c for c in found if not any(o is not c and issubclass(o, c) for o in found)), found[0])
    certain = all(issubclass(winner, c) for c in found) and \
        getattr(winner.__torch_function__, "__func__", None) is torch.Tensor.__torch_function__.__func__
    return winner, certain


# Methods whose scalar keyword (`value=` / `alpha=`) eager turns into a Python number with
# `.item()` when given a 0-d tensor: a data-dependent read that breaks the graph. The optimizers
# pass one on every step when compiled (`param.addcdiv_(exp_avg, denom, value=-step_size)` with
# `step_size` a tensor, as `_get_value` keeps it under compile), so the step's loop ran eagerly.
_TENSOR_SCALAR_KWARG = {"addcdiv_": "value", "addcdiv": "value", "addcmul_": "value", "addcmul": "value",
                        "add_": "alpha", "add": "alpha", "sub_": "alpha", "sub": "alpha"}


def _tensor_scalar_rewrite(tx, self, name, args, kwargs):
    """``x.addcdiv_(t1, t2, value=v)`` with ``v`` a 0-d floating tensor, traced as the same
    arithmetic on tensors (``x.add_((t1 * v) / t2)``, the order eager's kernel computes in). Only
    for floating (not complex) tensors throughout and a ``v`` that does not require grad (eager
    refuses that one with a TypeError); anything else keeps eager's call (and its break)."""
    key = _TENSOR_SCALAR_KWARG[name]
    v = kwargs.get(key)
    n_tensors = 2 if name.startswith("addc") else 1
    if not isinstance(v, TensorVariable) or set(kwargs) != {key} or len(args) != n_tensors:
        return None
    operands = [self, *args]
    if not all(isinstance(a, TensorVariable) for a in operands):
        return None
    if v.fake.dim() != 0 or not v.fake.is_floating_point() or v.fake.is_complex() or v.fake.requires_grad:
        return None  # (one that requires grad is not a number to eager: its TypeError, as it is)
    if not all(a.fake.is_floating_point() and not a.fake.is_complex() for a in operands):
        return None
    call = tx.output.call_function
    scaled = call(torch.mul, [args[0], v], {})
    if name.startswith("addcdiv"):
        scaled = call(torch.div, [scaled, args[1]], {})
    elif name.startswith("addcmul"):
        scaled = call(torch.mul, [scaled, args[1]], {})
    method = ("sub" if name.startswith("sub") else "add") + ("_" if name.endswith("_") else "")
    return tx.output.call_method(method, [self, scaled], {})


_FULL_KWARGS = {"dtype", "device", "layout", "pin_memory", "requires_grad"}


def _input_storage_offset(tx, t: TensorVariable, args, kwargs):
    """``x.storage_offset()`` of an input tensor the trace has not changed: the value read from it
    on every call (``L['x'].storage_offset()``), guarded only where the trace uses it, and a symbol
    once it changed between compiles (as an int argument is). torch.compile 2.13 breaks there and
    passes the offset on as an int: returned as is, one graph for every offset; in arithmetic, a
    second graph with a symbol. (Guarding every input's offset recompiled per offset.)"""
    import functools
    from ember.capture.sources import CallSource
    from ember.capture.variables.base import LazyGuardedConstant
    fake, real = t.fake, t.real
    if args or kwargs or t.source is None or real is None or type(real) not in (torch.Tensor, torch.nn.Parameter):
        return None
    if has_symbols(fake.storage_offset()) or real.storage_offset() != fake.storage_offset() \
            or fake.is_inference() or tx.output.input_versions.get(id(fake)) != fake._version:
        return None  # (written by the trace: the real offset is not its offset now)
    value = real.storage_offset()
    source = CallSource(torch.Tensor.storage_offset, t.source, ())
    symbolic = tx.output.symbolic_int(source, value)
    if symbolic is not None:
        return symbolic
    return LazyGuardedConstant(value, source, functools.partial(tx.guards.constant_match, source, value))


def full_with_tensor_fill(tx, base, args, kwargs):
    """``torch.full(size, v)`` / ``x.new_full(size, v)`` with ``v`` a 0-d tensor, traced as
    ``torch.empty(size).fill_(v)`` / ``x.new_empty(size).fill_(v)`` (as torch.compile does).

    Eager turns ``v`` into a Python number (``.item()``): a data-dependent read that broke the
    graph, and under fullgraph made an unbacked symbol the fake kernel consumed
    (PendingUnbackedSymbolNotFound escaped). ``fill_`` takes the 0-d tensor as it is. ``full``'s
    dtype comes from the number's kind when not given (bool, int64, the default float dtype).
    Only where the two agree: a complex ``v`` (eager's overflow error), one that requires grad
    (eager's TypeError), ``requires_grad=True`` or ``out=`` keep eager's call. ``base`` is the
    tensor of ``new_full``, None for ``torch.full``."""
    if "fill_value" in kwargs:
        if len(args) != 1:
            return None
        args, kwargs = [args[0], kwargs["fill_value"]], {k: v for k, v in kwargs.items() if k != "fill_value"}
    if len(args) != 2 or not set(kwargs) <= _FULL_KWARGS:
        return None
    size, v = args
    if not isinstance(v, TensorVariable) or type(v.fake).__name__ != "FakeTensor":
        return None
    if v.fake.dim() != 0 or v.fake.is_complex() or v.fake.requires_grad:
        return None
    if "requires_grad" in kwargs and not (kwargs["requires_grad"].is_constant()
                                          and kwargs["requires_grad"].as_constant() is False):
        return None
    if any(not k.is_constant() for k in kwargs.values()):
        return None
    kwargs = dict(kwargs)
    if base is None:
        if "dtype" not in kwargs or kwargs["dtype"].as_constant() is None:
            d = v.fake.dtype
            kwargs["dtype"] = ConstantVariable(torch.bool if d is torch.bool else torch.int64
                                               if not d.is_floating_point else torch.get_default_dtype())
        empty = tx.output.call_function(torch.empty, [size], kwargs)
    else:
        empty = tx.output.call_method("new_empty", [base, size], kwargs)
    return tx.output.call_method("fill_", [empty, v], {})
