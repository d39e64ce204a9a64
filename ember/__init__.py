"""ember: a just-in-time compiler frontend for PyTorch, in plain Python.

    import ember
    fast = ember.compile(model)                  # same knobs as PyTorch's compile
    ember.explain(model)(x)                      # graphs, breaks, guards, why
"""
from ember.config import config
from ember.exc import Unsupported
from ember.backends.registry import list_backends, lookup_backend, register_backend
from ember.metrics import compile_times, stats
from ember.api import compile, reset, explain, install_torch_reset as _install_torch_reset
from ember.capture.dynamic_dims import mark_dynamic, maybe_mark_dynamic, mark_static
from ember import compiled_autograd
from ember.capture.stance import set_stance, install as _install_stance

_install_stance()  # torch.compiler.set_stance sets ember's stance too
_install_torch_reset()  # torch.compiler.reset() resets ember too

if config.trace:
    from ember import trace_log as _trace_log
    _trace_log.sync(config.trace)

if config.logs:
    from ember.report.logs import set_logs as _set_logs
    _set_logs(config.logs)

__all__ = [
    "compile", "reset", "explain", "config", "Unsupported", "lookup_backend",
    "register_backend", "list_backends", "stats", "compile_times",
    "mark_dynamic", "maybe_mark_dynamic", "mark_static", "compiled_autograd", "set_stance",
]
