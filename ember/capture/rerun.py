"""A graph that raises at run time (an index out of range, invalid probabilities, a singular
matrix): eager had already done everything before the failing op — appended to lists, set
attributes, updated inputs in place — and ember's deferred side effects had not. The entry then
runs the frame again, eagerly, from its start, which leaves exactly eager's state and raises
eager's exception. Only for graphs whose partial run changed nothing observable: no in-place op
(run before the failure, it would be applied twice) and no random op (the RNG moved on). A write
into a tensor the graph made itself (no input's storage) is no such change: the rerun makes that
tensor anew (``writes_graph_made``)."""
from __future__ import annotations

import operator

import torch

_MUTATING_FUNCTIONS = {operator.setitem, operator.iadd, operator.isub, operator.imul, operator.itruediv,
                       operator.ifloordiv, operator.imod, operator.ipow, operator.iand, operator.ior,
                       operator.ixor, operator.ilshift, operator.irshift, operator.imatmul, operator.delitem}
_RANDOM_PARTS = ("rand", "dropout", "bernoulli", "normal", "multinomial", "exponential", "poisson",
                 "uniform", "cauchy", "geometric", "log_normal", "random", "seed", "rng", "shuffle", "perm",
                 "gumbel", "rrelu", "sample",
                 # (ops torch tags nondeterministic_seeded under other names: Gamma's rsample, and
                 # attention / RNN kernels that draw when given a dropout probability)
                 "standard_gamma", "binomial", "scaled_dot_product", "rnn", "lstm", "gru")


# functionals that update running statistics in place (training mode, buffers given)
_UPDATES_BUFFERS = ("batch_norm", "instance_norm")


def _name(target) -> str:
    return target if isinstance(target, str) else getattr(target, "__name__", "") or ""


def _changes_state(node: torch.fx.Node, mutations_after: bool) -> bool:
    if node.op in ("placeholder", "output"):
        return False
    if not call_changes_state(node.op, node.target, node.kwargs, mutations_after):
        return False
    # a write into a tensor the graph made itself (``torch.empty(n).normal_()``) is redone by a
    # rerun on a tensor made anew: it changes nothing a rerun sees (a draw still moves the RNG)
    return not (writes_graph_made(node.graph, _written(node.target, node.args, node.kwargs))
                and not _random(node.target))


def _random(target) -> bool:
    return any(part in _name(target).lower() for part in _RANDOM_PARTS)


def _written(target, args, kwargs):
    """The argument a writing call writes into (``out=``, else its first): an fx.Node or tracker."""
    if "out" in kwargs:
        return kwargs["out"]
    if any(part in _name(target).lower() for part in _UPDATES_BUFFERS):
        return None  # (writes its running-statistics arguments)
    return args[0] if args else None


def writes_graph_made(graph: torch.fx.Graph, written) -> bool:
    """Whether ``written`` (an fx.Node of ``graph``) is a tensor the graph made: its storage is no
    graph input's (placeholder or attribute). False where that cannot be told."""
    from torch.multiprocessing.reductions import StorageWeakRef
    value = getattr(written, "meta", {}).get("example_value") if isinstance(written, torch.fx.Node) else None
    if type(value) is not torch._subclasses.fake_tensor.FakeTensor or getattr(written, "graph", None) is not graph:
        return False
    try:
        mine = StorageWeakRef(value.untyped_storage())
        for n in graph.nodes:
            if n.op in ("placeholder", "get_attr"):
                v = n.meta.get("example_value")
                if isinstance(v, torch.Tensor):
                    if StorageWeakRef(v.untyped_storage()) == mine:
                        return False
                elif n.op == "get_attr" or v is None:
                    return False  # (an input of unknown kind)
    except Exception:  # noqa: BLE001 — a tensor without storage (sparse, subclass): unknown
        return False
    return True


def graph_changes_state(graph: torch.fx.Graph) -> tuple[bool, bool]:
    """(whether a run of the capture-level ``graph`` changes state a rerun sees or draws random
    numbers, whether all of that is draws: the RNG state put back makes a rerun exact)."""
    changing = [n for n in graph.nodes if _changes_state(n, False)]
    return bool(changing), all(_only_draws(n) or _local_draw(n) for n in changing)


def only_local_write(graph: torch.fx.Graph, op: str, target, args, kwargs: dict) -> tuple[bool, bool]:
    """For a call about to be made: (whether it writes only into a tensor the graph made, whether it
    also draws random numbers). ``args`` / ``kwargs`` hold trackers (their ``node``)."""
    if op not in ("call_function", "call_method") or getattr(target, "ember_function", None) is not None:
        return False, False
    written = _written(target, args, kwargs)
    node = getattr(written, "node", None)
    return writes_graph_made(graph, node), _random(target)


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


def _local_draw(node: torch.fx.Node) -> bool:
    """A random in-place op on a tensor the graph made (``torch.empty(3).normal_()``)."""
    return node.op in ("call_function", "call_method") and _random(node.target) \
        and getattr(node.target, "ember_function", None) is None \
        and writes_graph_made(node.graph, _written(node.target, node.args, node.kwargs))


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


def rerun_safe(gm: torch.fx.GraphModule, compiled, random_restored: bool = False, full_run: bool = False) -> bool:
    """Whether running ``gm`` (as ``compiled``) partly, up to an op that raises, leaves nothing
    behind. ember's AOT backends apply input mutations after the graph (``mutations_after_graph``).
    ``random_restored``: the entry puts torch's RNG state back before the rerun (random ops pass).
    ``full_run``: the rerun may also follow a whole run (a data-dependent check the trace assumed,
    tested after the graph returned): the AOT epilogue has then written the inputs too."""
    after = getattr(compiled, "mutations_after_graph", False) is True and not full_run
    if any(_changes_state(n, after) and not (random_restored and (_only_draws(n) or _local_draw(n)))
           for n in gm.graph.nodes):
        return False
    return random_restored or not draws_inside(compiled)


def draws_inside(compiled) -> bool:
    """Whether the aten graphs an AOT backend traced draw random numbers: they tell random ops by
    their tag (a Python function such as F.gumbel_softmax draws inside, under a name that says
    nothing)."""
    graphs = getattr(compiled, "graphs", None)
    if isinstance(graphs, dict):
        for g in graphs.values():
            if isinstance(g, torch.fx.GraphModule) and any(
                    n.op == "call_function" and torch.Tag.nondeterministic_seeded in getattr(n.target, "tags", ())
                    for n in g.graph.nodes):
                return True
    return False


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
