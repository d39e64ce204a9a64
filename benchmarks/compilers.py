"""The compiler switch: the same calls for ember and for ``torch.compile``.

    c = get_compiler("ember")          # or "torch"
    c.reset()
    fast = c.compile(fn, backend="aot_eager")
    c.counts()  -> {"graphs", "graph_breaks", "frames", ...}

``ember`` is imported only when its compiler is used, so everything here runs
with ``--compilers torch`` while ember is incomplete; a failure to import or to
compile with ember surfaces as an exception that the caller records as a failed
row.
"""
from __future__ import annotations

import sys
import traceback
from typing import Any, Callable

import torch

COMPILERS = ("ember", "torch")


class TorchCompiler:
    name = "torch"

    def reset(self) -> None:
        # only if already imported: in a fresh process the import belongs to compile()
        if "torch._dynamo" in sys.modules:
            torch._dynamo.reset()
            torch._dynamo.utils.counters.clear()

    def compile(self, fn, *, backend: Any = "eager", dynamic=None, fullgraph: bool = False):
        return torch.compile(fn, backend=backend, dynamic=dynamic, fullgraph=fullgraph)

    def counts(self) -> dict[str, int]:
        c = torch._dynamo.utils.counters
        return {
            "graphs": int(c["stats"]["unique_graphs"]),
            # distinct reasons: Dynamo counts a break again each time it restarts
            # the analysis of a frame, so the raw sum over-counts
            "graph_breaks": len(c["graph_break"]),
            "frames": int(c["frames"]["ok"]),
        }

    def graph_break_reasons(self) -> list[str]:
        return sorted(torch._dynamo.utils.counters["graph_break"])

    def fallback_reasons(self) -> list[str]:
        return []

    def extra(self) -> dict[str, Any]:
        return {}


class EmberCompiler:
    name = "ember"

    def __init__(self) -> None:
        import ember  # noqa: F401 - raises here if ember cannot be imported
        self.ember = ember

    def reset(self) -> None:
        self.ember.reset()

    def compile(self, fn, *, backend: Any = "eager", dynamic=None, fullgraph: bool = False):
        return self.ember.compile(fn, backend=backend, dynamic=dynamic, fullgraph=fullgraph)

    def counts(self) -> dict[str, int]:
        s = self.ember.stats()
        return {"graphs": int(s.get("graphs", 0)), "graph_breaks": int(s.get("graph_breaks", 0)),
                "frames": int(s.get("frames", 0))}

    def graph_break_reasons(self) -> list[str]:
        """``reason at file:line`` per graph break ember recorded (best effort)."""
        try:
            from ember.report import compiled_functions
            return [r for f in compiled_functions() for r in f.break_reasons]
        except Exception:  # noqa: BLE001
            return []

    def fallback_reasons(self) -> list[str]:
        """Why functions ember was asked to compile run eagerly (best effort)."""
        try:
            from ember.report import compiled_functions
            return [f"{f.label}: {f.runs_eagerly_because}" for f in compiled_functions()
                    if f.runs_eagerly_because]
        except Exception:  # noqa: BLE001
            return []

    def extra(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        try:
            out["stats"] = dict(self.ember.stats())
        except Exception as e:  # noqa: BLE001
            out["stats_error"] = short_error(e)
        try:
            out["compile_times"] = {k: round(v, 4) for k, v in self.ember.compile_times().items()}
        except Exception as e:  # noqa: BLE001
            out["compile_times_error"] = short_error(e)
        return out


def get_compiler(name: str):
    if name == "torch":
        return TorchCompiler()
    if name == "ember":
        return EmberCompiler()
    raise ValueError(f"unknown compiler {name!r}; known: {COMPILERS}")


def short_error(e: BaseException, limit: int = 300) -> str:
    """``Type: message`` on one line, plus where it was raised, for a failed row."""
    msg = " ".join(str(e).split())
    if len(msg) > limit:
        msg = msg[:limit] + "..."
    tb = traceback.extract_tb(e.__traceback__)
    where = ""
    if tb:
        f = tb[-1]
        where = f" [at {'/'.join(f.filename.split('/')[-2:])}:{f.lineno}]"
    return f"{type(e).__name__}: {msg}{where}"


def recording_backend(inner: Callable | None = None):
    """A backend that records every graph it is given and the callable it returns.

    ``inner`` defaults to running the graph as is (``gm.forward``), i.e. the
    ``eager`` backend. ``backend.compiled`` lists the returned callables,
    ``backend.graphs`` the graph modules, ``backend.example_inputs`` their example
    inputs (which may be fake tensors).
    """
    def backend(gm: torch.fx.GraphModule, example_inputs):
        compiled = inner(gm, example_inputs) if inner is not None else gm.forward
        backend.graphs.append(gm)
        backend.example_inputs.append(list(example_inputs))
        backend.compiled.append(compiled)
        return compiled

    backend.graphs = []
    backend.example_inputs = []
    backend.compiled = []
    return backend
