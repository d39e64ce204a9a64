"""ember.report — explain, logs, summaries, the HTML report, the CLI (reads everything, changes nothing)."""
from ember.report.summary import CompiledFunctionReport, compiled_functions


def html(path: str = "ember_report.html", **kwargs) -> str:
    """Write one self-contained HTML report of everything compiled so far (see
    ``ember.report.html_report``); returns the path."""
    from ember.report import html_report
    return html_report.html(path, **kwargs)


__all__ = ["CompiledFunctionReport", "compiled_functions", "html"]
