"""Which non-leaf tensors have hooks or retain their gradient.

From Python an autograd Node does not list its hooks: a hook registered with
``t.register_hook`` on a non-leaf ``t`` lives in ``t._backward_hooks``, and ``t.retain_grad()``
sets ``t.retains_grad``, but nothing leads from ``t.grad_fn`` back to ``t``. So ember records
the tensor in its grad_fn's ``metadata`` dict (a per-Node dict autograd provides) when either
method is called: ``install()`` wraps ``Tensor.register_hook`` and ``Tensor.retain_grad`` (done
on ``import ember``). Leaf hooks need no record: ``AccumulateGrad.variable`` is the leaf.

Hooks registered on Nodes themselves (``grad_fn.register_hook`` / ``register_prehook``, on a
C++ Node or a custom Function's) cannot be listed either, and a Node does not say which of them
it holds; but autograd stores them in a dict it makes with
``torch.autograd.function._HookMixin._register_hook`` (a Python staticmethod it looks up on every
registration). ``install()`` wraps it to keep each such dict in a weak set: while one of them
holds a hook (its Node is alive, the hook not removed), ``node_hooks_live()`` is True and a
compiled backward runs eagerly instead (conservative: the Node may belong to another graph).

Not seen (documented in docs/compiled_autograd.md): hooks registered before ember was imported.
"""
from __future__ import annotations

import weakref

import torch

KEY = "ember_hooked_tensors"
_installed = False
_node_hook_dicts: dict[int, weakref.ref] = {}  # id -> the hook dict of a Node (dicts are unhashable)


def node_hooks_live() -> bool:
    """Whether a live autograd Node has a hook registered on it (since ``install()``)."""
    for ref in list(_node_hook_dicts.values()):
        d = ref()
        if d is not None and len(d):
            return True
    return False


def _keep_node_hook_dict(d) -> None:
    key = id(d)
    if key in _node_hook_dicts and _node_hook_dicts[key]() is d:
        return
    try:
        _node_hook_dicts[key] = weakref.ref(d, lambda _r, key=key: _node_hook_dicts.pop(key, None))
    except TypeError:  # (not weak-referenceable: a torch release that changed the dict)
        pass


def _tracing() -> bool:
    """Whether a fake, functional or proxy dispatch mode is active: a hook registered then sits on
    a Node of a traced graph (torch's AOTAutograd registers stack-trace hooks on its joint graph's
    Nodes and keeps them), never on one a real backward will run."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack
    for mode in _get_current_dispatch_mode_stack():
        if type(mode).__name__ in ("FakeTensorMode", "FunctionalTensorMode", "ProxyTorchDispatchMode"):
            return True
    return False


def _note(t: torch.Tensor) -> None:
    fn = t.grad_fn
    if fn is None:
        return
    refs = fn.metadata.setdefault(KEY, [])
    if not any(r() is t for r in refs):
        refs.append(weakref.ref(t))


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    register_hook = torch.Tensor.register_hook
    retain_grad = torch.Tensor.retain_grad

    def register_hook_noted(self, hook):
        handle = register_hook(self, hook)
        if self.grad_fn is not None:
            _note(self)
        return handle

    def retain_grad_noted(self):
        retain_grad(self)
        if self.grad_fn is not None:
            _note(self)

    mixin = getattr(torch.autograd.function, "_HookMixin", None)
    register_node_hook = mixin.__dict__.get("_register_hook") if mixin is not None else None
    if isinstance(register_node_hook, staticmethod):
        register_node_hook = register_node_hook.__func__

        def register_node_hook_noted(backward_hooks, hook):
            out = register_node_hook(backward_hooks, hook)
            if not _tracing():
                _keep_node_hook_dict(out[0])
            return out

        mixin._register_hook = staticmethod(register_node_hook_noted)

    set_materialize = torch.autograd.function.FunctionCtx.set_materialize_grads

    def set_materialize_grads_noted(self, value: bool):
        set_materialize(self, value)
        self._ember_no_materialize = not value  # (autograd's own flag cannot be read back)

    set_materialize_grads_noted.__doc__ = set_materialize.__doc__
    torch.autograd.function.FunctionCtx.set_materialize_grads = set_materialize_grads_noted
    register_hook_noted.__doc__ = register_hook.__doc__
    register_hook_noted.__wrapped__ = register_hook
    retain_grad_noted.__doc__ = retain_grad.__doc__
    torch.Tensor.register_hook = register_hook_noted
    torch.Tensor.retain_grad = retain_grad_noted


def hooked_tensors(node) -> list:
    """The live tensors of ``node`` (its outputs) with hooks or ``retains_grad``, by output_nr;
    None when one of them was changed in place since (compiled autograd then runs eagerly)."""
    meta = node.metadata
    refs = meta.get(KEY) if meta else None
    if not refs:
        return []
    out = []
    for r in refs:
        t = r()
        if t is None or not (t._backward_hooks or t.retains_grad):
            continue
        if t.grad_fn is not node:
            return None  # changed in place after its hook was registered: which Node fires it is subtle
        out.append(t)
    out.sort(key=lambda t: t.output_nr)
    return out
