"""ember.report — explain, logs, summaries, the CLI (reads everything, changes nothing)."""
from ember.report.summary import CompiledFunctionReport, compiled_functions

__all__ = ["CompiledFunctionReport", "compiled_functions"]
