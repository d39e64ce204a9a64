"""ember's settings: one typed object, overridable from the environment.

Every field can be set from the environment as ``EMBER_<NAME>`` (upper case),
e.g. ``EMBER_RECOMPILE_LIMIT=4`` or ``EMBER_STRICT=1``; values are parsed by the
field's type. Change settings in code with ``ember.config.recompile_limit = 4``
or temporarily with ``with ember.config.patch(strict=True): ...``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any


def _parse(kind: type, text: str) -> Any:
    if kind is bool:
        return text.strip().lower() in ("1", "true", "yes", "on")
    if kind is int:
        return int(text)
    if kind is float:
        return float(text)
    return text


@dataclasses.dataclass
class Config:
    # A code object recompiles at most this many times; after that it runs eagerly (a call that
    # needs another compile raises ember.exc.FailOnRecompileLimitHit instead under fullgraph=True
    # or fail_on_recompile_limit_hit, as torch.compile).
    recompile_limit: int = 8
    fail_on_recompile_limit_hit: bool = False
    # Raise internal compiler errors instead of falling back to eager.
    strict: bool = False
    # Force every frame to run eagerly (debugging aid, like TORCH_COMPILE_DISABLE).
    disable: bool = False
    # The autocast state the backward is traced under: "same_as_forward" (the
    # ambient state at compile time), "off", or torch.autocast kwargs as
    # "device_type=cpu,dtype=bfloat16" (";" separates several contexts; in code
    # also a dict or a list of dicts). See docs/aot.md.
    backward_pass_autocast: str = "same_as_forward"
    # Which partitioner aot_eager uses: "default" or "min_cut" (inductor always uses min_cut).
    aot_eager_partitioner: str = "default"
    # Keep float arguments as constants (a recompile per value). False, as torch: a float
    # argument whose value changed since the frame compiled becomes a symbolic float input.
    specialize_float: bool = False
    # Under torch.distributed, all-gather each frame's observed input sizes after its first trace
    # so every rank makes the same dynamic-shape decisions (ember/distributed/collectives.py).
    enable_compiler_collectives: bool = False
    # Data-dependent values, off by default as in torch: `.item()`/`.tolist()` of a computed tensor
    # become unbacked symbols in the graph instead of a graph break (capture_scalar_outputs); ops
    # whose output size depends on data (nonzero, unique, masked_select, boolean-mask indexing)
    # get unbacked sizes (capture_dynamic_output_shape_ops). A branch on such a value breaks.
    capture_scalar_outputs: bool = False
    capture_dynamic_output_shape_ops: bool = False
    # Facts about symbols the guards cannot check at entry (a data-dependent size's bounds, an
    # equation found mid-trace) are checked inside the graph by `_assert_scalar` nodes; False drops
    # them (torch's do_not_emit_runtime_asserts).
    runtime_asserts: bool = True
    # A graph break inside a function the trace inlined resumes inside that function (torch's
    # nested_graph_breaks, which its own test suite turns on): one graph covers the caller's code
    # before the call and the callee's before the break, and the rest of each runs in its own resume
    # function (capture/nested_breaks.py). False: the caller breaks at the call, and the callee
    # is compiled as a frame of its own (one more graph).
    nested_graph_breaks: bool = True
    # A graph break is an ember.Unsupported error to the caller instead (as under fullgraph=True,
    # but the frame may still be several graphs: a skipped frame, a recompile); torch's
    # `torch._dynamo.error_on_graph_break(b)` decorator sets it for the function it wraps
    # (capture/compile_settings.py), as `disable_nested_graph_breaks` sets nested_graph_breaks.
    error_on_graph_break: bool = False
    # Verbose logging artifacts (see ember.report.logs), like TORCH_LOGS.
    logs: str = ""
    # A directory to write the structured trace into (EMBER_TRACE=dir; what TORCH_TRACE writes, for
    # tlparse; see ember.report.trace and docs/observability.md). '' for off.
    trace: str = ""
    # Tests of the safety net: raise an internal error at one point ("guard", "capture",
    # "codegen", "resume", "backend" or "epilogue"; "" for none). See docs/safety_net.md.
    inject_fault: str = ""

    def patch(self, **changes: Any):
        """Context manager that sets fields and restores them on exit."""
        return _patch(self, changes)

    def load_env(self) -> None:
        for f in dataclasses.fields(self):
            text = os.environ.get("EMBER_" + f.name.upper())
            if text is not None:
                kind = type(getattr(self, f.name))
                setattr(self, f.name, _parse(kind, text))

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in {f.name for f in dataclasses.fields(Config)}:
            raise AttributeError(f"ember.config has no setting {name!r}")
        if name == "inject_fault" and value:
            from ember.exc import FAULT_POINTS
            if value not in FAULT_POINTS:
                raise ValueError(f"ember.config.inject_fault must be one of {FAULT_POINTS} or '', got {value!r}")
        object.__setattr__(self, name, value)


@contextlib.contextmanager
def _patch(cfg: Config, changes: dict[str, Any]):
    old = {k: getattr(cfg, k) for k in changes}
    for k, v in changes.items():
        setattr(cfg, k, v)
    try:
        yield cfg
    finally:
        for k, v in old.items():
            setattr(cfg, k, v)


config = Config()
config.load_env()
