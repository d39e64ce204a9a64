"""Pure-Python versions of torch C helpers that return Python containers of tensors (a graph op
cannot return a dict): traced in place of the C function, they build the same structure from the
tensors' metadata."""
from __future__ import annotations


def group_tensors_by_device_and_dtype(tensorlistlist, with_indices=False):
    """``torch._C._group_tensors_by_device_and_dtype``: the tensors of ``tensorlistlist[0]`` grouped
    by (device, dtype), each group holding the matching entries of every list (None stays None)
    and, for ``with_indices``, their positions; groups in order of first appearance."""
    groups = {}
    first = tensorlistlist[0]
    for i in range(len(first)):
        t = first[i]
        key = (t.device, t.dtype)
        if key not in groups:
            groups[key] = ([[] for _ in tensorlistlist], [])
        lists, indices = groups[key]
        for j in range(len(tensorlistlist)):
            lists[j].append(tensorlistlist[j][i] if tensorlistlist[j] else None)
        indices.append(i)
    return {k: (v[0], v[1] if with_indices else []) for k, v in groups.items()}


POLYFILLS = {}
try:
    import torch
    POLYFILLS[torch._C._group_tensors_by_device_and_dtype] = group_tensors_by_device_and_dtype
except AttributeError:  # (a torch build without it)
    pass


def kl_divergence(p, q):
    """``torch.distributions.kl.kl_divergence`` without its memo: the memo only caches
    ``_dispatch_kl`` (which reads the registry, guarded), and reading it would guard on its keys,
    which the first call itself adds to (a recompile on the second call; torch.compile 2.13 does
    not guard the memo either). The memo is left as it was."""
    import torch.distributions.kl as kl
    fun = kl._dispatch_kl(type(p), type(q))
    if fun is NotImplemented:
        raise NotImplementedError(
            f"No KL(p || q) is implemented for p type {p.__class__.__name__} and q type {q.__class__.__name__}"
        )
    return fun(p, q)


def graph_module_call(self, obj, *args, **kwargs):
    """``torch.fx.graph_module._WrappedCall.__call__`` (what calling a GraphModule runs) without its
    ``try``: its ``except`` only prints where in the generated code the error arose, then raises it
    again. Traced as it is, every op of the graph sat under a handler that may catch, and an input
    written there (a compiled-autograd graph running a hook's ``mul_``) ended the graph."""
    if self.cls_call is not None:
        return self.cls_call(obj, *args, **kwargs)
    return super(self.cls, obj).__call__(*args, **kwargs)


def function_polyfill(fn):
    """The polyfill traced in place of the Python function ``fn``, or None."""
    import sys
    kl = sys.modules.get("torch.distributions.kl")
    if kl is not None and fn is getattr(kl, "kl_divergence", None):
        return kl_divergence
    graph_module = sys.modules.get("torch.fx.graph_module")
    wrapped_call = getattr(graph_module, "_WrappedCall", None) if graph_module is not None else None
    if wrapped_call is not None and fn is wrapped_call.__dict__.get("__call__"):
        return graph_module_call
    return None
