"""``python -m ember report script.py [args]``: run a script with recording on, write the report."""
from __future__ import annotations

import os
import runpy
import shutil
import sys
import tempfile
import traceback


def report_script(script: str, args: list[str], output: str = "ember_report.html") -> int:
    """Run ``script`` as ``python script args`` would, keeping the structured trace's records in
    memory (a temporary directory unless ``EMBER_TRACE`` already traces), then write the HTML report
    to ``output``. Returns the script's exit status (1 when it raised; the report is written)."""
    from ember import trace_log
    from ember.report import html_report, trace

    if not os.path.isfile(script):
        print(f"python -m ember report: no such file: {script}", file=sys.stderr)
        return 2
    tmp = None
    if trace_log.writer is None or not trace_log.writer.keep:
        previous = trace_log.writer.directory if trace_log.writer is not None else None
        tmp = previous or tempfile.mkdtemp(prefix="ember_report_")
        trace.enable(tmp, keep=True)
        tmp = None if previous else tmp
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    sys.argv = [script, *args]
    script_dir = os.path.dirname(os.path.abspath(script))
    if sys.path:
        sys.path[0] = script_dir
    else:
        sys.path.insert(0, script_dir)
    status, error = 0, None
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code
        status = code if isinstance(code, int) else (0 if code is None else 1)
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 — the report is still written, as far as it got
        error = traceback.format_exc()
        traceback.print_exc()
        status = 1
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None:
            sys.path[0] = saved_path0
    records = trace.records()
    path = html_report.html(output, trace_records=records, script=script, error=error)
    if tmp is not None:
        trace.disable()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"ember: report written to {os.path.abspath(path)}", file=sys.stderr)
    return status
