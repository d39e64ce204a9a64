"""A graph that raises at run time (an index out of range, invalid probabilities, a singular
matrix): eager had already done everything before the failing op — appended to lists, set
attributes, updated inputs in place — and ember's deferred side effects had not. The entry then
runs the frame again, eagerly, from its start, which leaves exactly eager's state and raises
eager's exception. Only for graphs whose partial run changed nothing observable: no in-place op
(run before the failure, it would be applied twice) and no random op (the RNG moved on)."""
from __future__ import annotations

import operator

import torch

_MUTATING_FUNCTIONS = {operator.setitem, operator.iadd, operator.isub, operator.imul, operator.itruediv,
                       operator.ifloordiv, operator.imod, operator.ipow, operator.iand, operator.ior,
                       operator.ixor, operator.ilshift, operator.irshift, operator.imatmul, operator.delitem}
_RANDOM_PARTS = ("rand", "dropout", "bernoulli", "normal", "multinomial", "exponential", "poisson",
                 "uniform", "cauchy", "geometric", "log_normal", "random", "seed", "rng", "shuffle", "perm",
                 "gumbel", "rrelu", "sample")


# functionals that update running statistics in place (training mode, buffers given)
_UPDATES_BUFFERS = ("batch_norm", "instance_norm")


def _name(target) -> str:
    return target if isinstance(target, str) else getattr(target, "__name__", "") or ""


def _changes_state(node: torch.fx.Node, mutations_after: bool) -> bool:
    if node.op in ("placeholder", "output"):
        return False
    return call_changes_state(node.op, node.target, node.kwargs, mutations_after)


def call_changes_state(op: str, target, kwargs: dict, mutations_after: bool = False) -> bool:
    """Whether a graph call ``op``/``target`` with these keyword arguments (constants) may change
    state (an in-place write, a random draw) that a rerun of the frame would repeat."""
    if op != "call_function" and op != "call_method":
        return True  # get_attr of a subgraph (cond, checkpoint), call_module: not looked into
    if getattr(target, "ember_function", None) is not None:
        return True
    name = _name(target).lower()
    trailing = name.endswith("_") and not name.endswith("__") and getattr(target, "__module__", None) != "_operator"
    if not mutations_after and (target in _MUTATING_FUNCTIONS or trailing  # (operator.and_ is no write)
                                or "out" in kwargs or kwargs.get("inplace") is True
                                or any(part in name for part in _UPDATES_BUFFERS)):
        return True
    return any(part in name for part in _RANDOM_PARTS)


def _only_draws(node: torch.fx.Node) -> bool:
    """A random op that writes nothing (``torch.normal``, ``multinomial``; not ``normal_``)."""
    return node.op in ("call_function", "call_method") and getattr(node.target, "ember_function", None) is None \
        and not _writes(node.target, node.kwargs) and any(part in _name(node.target).lower() for part in _RANDOM_PARTS)


def only_draws(op: str, target, kwargs: dict) -> bool:
    """The same for a call about to be made (keyword arguments as constants)."""
    return op in ("call_function", "call_method") and getattr(target, "ember_function", None) is None \
        and not _writes(target, kwargs) and any(part in _name(target).lower() for part in _RANDOM_PARTS)


def _writes(target, kwargs) -> bool:
    name = _name(target).lower()
    trailing = name.endswith("_") and not name.endswith("__") and getattr(target, "__module__", None) != "_operator"
    return target in _MUTATING_FUNCTIONS or trailing or "out" in kwargs or kwargs.get("inplace") is True \
        or any(part in name for part in _UPDATES_BUFFERS)


def draws_random_numbers(graph: torch.fx.Graph) -> bool:
    """Whether a (capture-level) graph may draw from the RNG (by op name: conservative)."""
    return any(n.op not in ("placeholder", "output")
               and (n.op not in ("call_function", "call_method")
                    or any(part in _name(n.target).lower() for part in _RANDOM_PARTS))
               for n in graph.nodes)


def rerun_safe(gm: torch.fx.GraphModule, compiled, random_restored: bool = False) -> bool:
    """Whether running ``gm`` (as ``compiled``) partly, up to an op that raises, leaves nothing
    behind. ember's AOT backends apply input mutations after the graph (``mutations_after_graph``).
    ``random_restored``: the entry puts torch's RNG state back before the rerun (random ops pass)."""
    after = getattr(compiled, "mutations_after_graph", False) is True
    if any(_changes_state(n, after) and not (random_restored and _only_draws(n)) for n in gm.graph.nodes):
        return False
    if random_restored:
        return True
    # the aten graphs an AOT backend traced tell random ops by their tag (a Python function such as
    # F.gumbel_softmax draws inside, under a name that says nothing)
    graphs = getattr(compiled, "graphs", None)
    if isinstance(graphs, dict):
        for g in graphs.values():
            if isinstance(g, torch.fx.GraphModule) and any(
                    n.op == "call_function" and torch.Tag.nondeterministic_seeded in getattr(n.target, "tags", ())
                    for n in g.graph.nodes):
                return False
    return True


def user_callbacks_active() -> bool:
    """Whether the graph's ops called back into the program while it ran: saved-tensor hooks
    (``saved_tensors_hooks``, a non-reentrant checkpoint's pack hooks), a torch function or
    dispatch mode. Then a partial run was not invisible (the hooks ran, and counted), and what the
    graph raised may be the program's own control flow (a checkpoint's recomputation stops early
    by raising from its pack hook): the exception propagates as it is, with no rerun."""
    return (torch._C._autograd._top_saved_tensors_default_hooks(True) is not None
            or torch._C._len_torch_dispatch_stack() > 0 or torch._C._len_torch_function_stack() > 0)


def runs_subclass_code(inputs) -> bool:
    """Whether a graph input is a tensor subclass: its ``__torch_function__`` /
    ``__torch_dispatch__`` (the program's Python) runs for the graph's ops, so a partial run of
    the graph already ran it (a counter, a log): a rerun of the frame would run it again."""
    return any(isinstance(v, torch.Tensor) and type(v) not in (torch.Tensor, torch.nn.Parameter)
               for v in inputs)
