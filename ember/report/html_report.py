"""One self-contained HTML page of everything ember compiled in this process.

    ember.report.html("report.html")           # from code: every function compiled so far
    python -m ember report script.py [args]    # run a script, then write ember_report.html

Per compiled function (a function, a resume function after a graph break, a callee compiled at a
break): each compile (time per phase, the recompile reason naming the failing guard and its
line), graph breaks (registry id, explanation, hint, source line), and per cache entry its
captured graph (readable code and an SVG drawing, ``ember.report.graph_svg``), the AOT layer's
graphs when the structured trace kept them, its guards with provenance, and the generated entry
function; a resume function's code as Python (decompiled by the optional ``depyf``) and as
bytecode (``dis``). Inline CSS and JS only (no network needed to view it); every piece of user
text goes through ``html.escape``. Reads the caches; changes nothing.
"""
from __future__ import annotations

import dataclasses
import datetime
import dis
import html as _html
import io
import os
import sys

from ember.report import graph_svg

esc = _html.escape


@dataclasses.dataclass
class Frame:
    """One compiled function, as the report shows it."""
    cache: object
    label: str
    kind: str              # "function", "resume function", "callee at a graph break"
    where: str             # file:line of its def
    compiles: list         # the cache's compile_log dicts
    entries: list          # CacheEntry, in cache order
    aot_graphs: dict       # compile index -> [(record name, payload)] (when traced with keep=True)
    recompile_reasons: list  # (copies of the cache's lists: the report of one moment)
    break_reasons: list
    fallback_reasons: list
    run_eagerly_reason: str | None


def frames(trace_records=None) -> list[Frame]:
    """Every function ember keeps a cache for, in the order of their first compile."""
    from ember.capture.cache import live_caches
    by_compile = _aot_by_compile(trace_records or [])
    out = []
    for c in live_caches():
        log = list(getattr(c, "compile_log", []))
        if not log and not c.entries and c.run_eagerly_reason is None:
            continue
        code = c.fn.__code__
        kind = "resume function" if c.is_resume else ("callee at a graph break" if ":" in c.label
                                                        else "function")
        tf = getattr(c, "trace_frame", None)
        aot = by_compile.get(tf[1], {}) if tf is not None and _writer_is(tf[0]) else {}
        out.append(Frame(c, c.label, kind, f"{code.co_filename}:{code.co_firstlineno}", log,
                         list(c.entries), aot, list(c.recompile_reasons), list(c.break_reasons),
                         list(getattr(c, "fallback_reasons", [])), c.run_eagerly_reason))
    out.sort(key=lambda f: (f.compiles[0]["seq"] if f.compiles else 1 << 62, f.label))
    return out


def _writer_is(w) -> bool:
    from ember import trace_log
    return w is trace_log.writer


def _aot_by_compile(records) -> dict:
    out: dict = {}
    for r in records:
        if r.name.startswith("aot_") and r.name.endswith("_graph") and r.compile_id and r.payload:
            fid, n, _ = r.compile_id
            out.setdefault(fid, {}).setdefault(n, []).append((r.name, r.payload))
    return out


def html(path: str = "ember_report.html", title: str | None = None, trace_records=None,
         script: str | None = None, error: str | None = None) -> str:
    """Write the report of everything compiled so far to ``path``; returns the path. Uses the
    structured trace's kept records (``ember.report.trace.enable(dir, keep=True)``) for the AOT
    graphs when there are some."""
    if trace_records is None:
        from ember.report import trace
        trace_records = trace.records()
    text = render(frames(trace_records), title=title, script=script, error=error)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


# -- rendering --------------------------------------------------------------------------------

def render(fs: list[Frame], title: str | None = None, script: str | None = None,
           error: str | None = None) -> str:
    import torch

    import ember
    title = title or (f"ember report: {os.path.basename(script)}" if script else "ember report")
    stats = ember.stats()
    times = ember.compile_times()
    head = [f"<h1>{esc(title)}</h1>",
            f'<p class="meta">{esc(datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S"))} · '
            f"Python {esc(sys.version.split()[0])} · torch {esc(torch.__version__)}"
            + (f" · script <code>{esc(script)}</code>" if script else "") + "</p>"]
    if error:
        head.append(f'<div class="error"><b>The script raised:</b><pre>{esc(error)}</pre></div>')
    head.append('<p class="meta">' + " · ".join(f"{esc(k)}: {v}" for k, v in stats.items())
                + " · compile time: " + esc(_phases(times)) + "</p>")
    body = [_summary(fs)] + [_safe_frame(i, f) for i, f in enumerate(fs)]
    if not fs:
        body.append('<p class="note">Nothing was compiled.</p>')
    return (_PAGE.replace("__TITLE__", esc(title)).replace("__CSS__", _CSS).replace("__JS__", _JS)
            .replace("__BODY__", "\n".join(head + body)))


def _phases(p: dict) -> str:
    return ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in sorted(p.items())) or "none"


def _summary(fs: list[Frame]) -> str:
    rows = ['<section id="summary"><h2>Compiled functions</h2>'
            '<div class="tools"><input id="filter" placeholder="filter by name" aria-label="filter"> '
            '<button id="expand">expand all</button> <button id="collapse">collapse all</button></div>'
            '<table class="summary"><tr><th>function</th><th>kind</th><th>compiles</th><th>graphs</th>'
            '<th>guards</th><th>breaks</th><th>recompiles</th><th>compile time</th><th>status</th></tr>']
    for i, f in enumerate(fs):
        c = f.cache
        graphs = sum(1 for e in f.entries if e.graph is not None)
        guards = sum(len(_guard_list(e)) for e in f.entries)
        secs = sum(r.get("seconds", 0.0) for r in f.compiles)
        status = "runs eagerly" if f.run_eagerly_reason else "compiled"
        rows.append(f'<tr data-label="{esc(f.label)}"><td><a href="#frame-{i}">{esc(f.label)}</a></td>'
                    f"<td>{esc(f.kind)}</td><td>{len(f.compiles)}</td><td>{graphs}</td><td>{guards}</td>"
                    f"<td>{len(f.break_reasons)}</td><td>{len(f.recompile_reasons)}</td>"
                    f"<td>{secs * 1000:.1f} ms</td><td>{esc(status)}</td></tr>")
    rows.append("</table></section>")
    return "\n".join(rows)


def _safe_frame(i: int, f: Frame) -> str:
    """One function's section; a failure to render it leaves a note, never a missing report."""
    try:
        return _frame(i, f)
    except Exception as e:  # noqa: BLE001
        return (f'<section class="frame" id="frame-{i}" data-label="{esc(f.label)}"><h2>{esc(f.label)}</h2>'
                f'<p class="error">could not render this function: {esc(type(e).__name__)}: {esc(str(e))}</p>'
                "</section>")


def _frame(i: int, f: Frame) -> str:
    c = f.cache
    out = [f'<section class="frame" id="frame-{i}" data-label="{esc(f.label)}">',
           f'<h2>{esc(f.label)} <span class="kind">{esc(f.kind)}</span></h2>',
           f'<p class="meta">defined at <code>{esc(f.where)}</code></p>']
    if f.run_eagerly_reason:
        out.append(f'<p class="eager">Runs eagerly: {esc(str(f.run_eagerly_reason))}</p>')
    for e in f.fallback_reasons:
        out.append(f'<p class="eager">Fell back: {esc(_break_line(e))}</p>')
    out.append(_compiles(f))
    out.append(_recompiles(f.recompile_reasons))
    out.append(_breaks(f))
    for k, entry in enumerate(f.entries):
        out.append(_entry(f, k, entry))
    if c.is_resume:
        out.append(_resume_code(c.fn.__code__))
    else:
        out.append(_source(c.fn))
    out.append("</section>")
    return "\n".join(out)


def _compiles(f: Frame) -> str:
    if not f.compiles:
        return ""
    rows = ['<div class="compiles"><h3>Compiles</h3><table><tr><th>#</th><th>time</th>'
            "<th>per phase</th><th>result</th><th>why</th></tr>"]
    for n, r in enumerate(f.compiles):
        entry = r.get("entry")
        if entry is None:
            result = "runs eagerly"
        elif entry.eager_reason is not None:
            result = "eager entry (these inputs run eagerly)"
        elif entry in f.entries:
            result = f"entry {f.entries.index(entry)}"
        else:
            result = "dropped"
        why = f"recompile: {r['reason']}" if r.get("reason") else "first call"
        rows.append(f"<tr><td>{n}</td><td>{r.get('seconds', 0.0) * 1000:.1f} ms</td>"
                    f"<td>{esc(_phases(r.get('phases', {})))}</td><td>{esc(result)}</td><td>{esc(why)}</td></tr>")
    rows.append("</table></div>")
    return "\n".join(rows)


def _recompiles(reasons: list) -> str:
    if not reasons:
        return ""
    items = "".join(f"<li><code>{esc(str(r))}</code></li>" for r in reasons)
    return (f'<div class="recompiles"><h3>Recompiles</h3><p class="note">The guard that failed, the '
            f"value now, and the line that made the trace depend on it.</p><ol>{items}</ol></div>")


def _break_line(e) -> str:
    gid = getattr(e, "id", None)
    where = getattr(e, "where", None)
    return (f"{gid}: " if gid else "") + str(getattr(e, "reason", e)) + (f" at {where}" if where else "")


def _breaks(f: Frame) -> str:
    reasons = [(k, e.break_reason) for k, e in enumerate(f.entries) if e.break_reason is not None]
    reasons += [(k, e.eager_reason) for k, e in enumerate(f.entries)
                if e.eager_reason is not None and not isinstance(e.eager_reason, str)]
    if not reasons:
        return ""
    out = ['<div class="breaks"><h3>Graph breaks</h3>']
    for k, e in reasons:
        gid = getattr(e, "id", None) or "?"
        out.append('<div class="break">'
                   f'<p><span class="gbid">{esc(gid)}</span> <b>{esc(getattr(e, "explanation", "") or "")}</b>'
                   f' <span class="note">(entry {k})</span></p>'
                   f'<p class="reason">{esc(str(getattr(e, "reason", e)))}</p>')
        where = getattr(e, "where", None)
        if where:
            src = (getattr(e, "source_line", None) or "").strip()
            out.append(f'<p>at <code>{esc(where)}</code></p>' + (f'<pre class="src">{esc(src)}</pre>' if src else ""))
        stack = getattr(e, "user_stack", None) or []
        if len(stack) > 1:
            out.append('<p class="note">user stack: ' + " → ".join(f"<code>{esc(str(s))}</code>" for s in stack)
                       + "</p>")
        hint = getattr(e, "hint", None)
        if hint:
            out.append(f'<p class="hint">hint: {esc(hint)}</p>')
        out.append("</div>")
    out.append("</div>")
    return "\n".join(out)


def _entry(f: Frame, k: int, entry) -> str:
    out = [f'<details class="entry" open><summary>entry {k}: '
           f"{len(_guard_list(entry))} guards"
           + (f", graph of {len(entry.graph.graph.nodes)} nodes" if entry.graph is not None else ", no graph")
           + (", breaks" if entry.break_reason is not None else "")
           + (", runs eagerly" if entry.eager_reason is not None else "") + "</summary>"]
    if entry.graph is not None:
        gm = entry.graph
        try:
            code = gm.print_readable(print_output=False)
        except Exception:  # noqa: BLE001 — a report never fails on one graph
            code = gm.code
        side = len(gm.graph.nodes) <= 24  # small: code and drawing side by side; else one above the other
        out.append('<div class="graph-section"><h4>Captured graph</h4>'
                   f'<div class="{"cols" if side else "rows"}"><div class="col">'
                   f'<pre class="code">{esc(code)}</pre></div><div class="col svgbox">'
                   f"{_svg_or_note(gm)}</div></div></div>")
    n = next((i for i, r in enumerate(f.compiles) if r.get("entry") is entry), None)
    for name, payload in f.aot_graphs.get(n, []) if n is not None else []:
        out.append(f'<details class="aot"><summary>{esc(name)}</summary><pre class="code">{esc(payload)}</pre></details>')
    out.append(_guards(entry))
    if getattr(entry, "source", None):
        out.append('<details class="generated"><summary>generated entry function</summary>'
                   f'<pre class="code">{esc(entry.source)}</pre></details>')
    out.append("</details>")
    return "\n".join(out)


def _svg_or_note(gm) -> str:
    try:
        return graph_svg.svg(gm)
    except Exception as e:  # noqa: BLE001
        return f'<p class="note">no drawing ({esc(type(e).__name__)}: {esc(str(e))})</p>' + graph_svg.listing(gm)


def _guard_list(entry) -> list:
    return entry.guards.ordered() if getattr(entry, "guards", None) is not None else []


def _guards(entry) -> str:
    guards = _guard_list(entry)
    rows = ['<div class="guards"><h4>Guards</h4><table><tr><th>kind</th><th>guard</th>'
            "<th>made by (provenance)</th></tr>"]
    for g in guards:
        p = g.provenance
        if p is not None:
            prov = (f"<code>{esc(p.where)}</code> in {esc(p.function)} <span class='op'>({esc(p.operation)})</span>"
                    + (f"<pre class='src'>{esc(p.source_line)}</pre>" if p.source_line else ""))
            if len(p.stack) > 1:
                prov += "<span class='note'>" + " → ".join(esc(s) for s in p.stack) + "</span>"
        else:
            prov = "<span class='note'>not recorded</span>"
        rows.append(f"<tr><td>{esc(g.kind.name)}</td><td><code>{esc(g.text)}</code></td><td>{prov}</td></tr>")
    rows.append("</table></div>")
    return "\n".join(rows)


def _source(fn) -> str:
    import inspect
    try:
        src = inspect.getsource(fn)
    except (OSError, TypeError):
        return ""
    return f'<details class="source"><summary>source</summary><pre class="code python">{esc(src)}</pre></details>'


def decompile(code) -> str | None:
    """Python source for ``code`` via the optional ``depyf`` package; None when it is missing or
    fails."""
    try:
        import depyf
        return depyf.decompile(code)
    except Exception:  # noqa: BLE001 — optional, and decompilers fail on unusual bytecode
        return None


def _resume_code(code) -> str:
    buf = io.StringIO()
    dis.dis(code, file=buf)
    src = decompile(code)
    py = (f'<pre class="code python">{esc(src)}</pre>' if src is not None else
          '<p class="note">Python source unavailable (install the optional <code>depyf</code> package '
          "to decompile); bytecode below.</p>")
    return ('<div class="resume"><h3>Resume function code</h3><h4>as Python (decompiled)</h4>'
            f'{py}<details class="bytecode" open><summary>bytecode (dis)</summary>'
            f'<pre class="code">{esc(buf.getvalue())}</pre></details></div>')


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<style>__CSS__</style></head>
<body data-js="off">
__BODY__
<script>__JS__</script>
</body></html>
"""

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:20px 28px;color:#1b1f24;background:#fff}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:0 0 4px;color:#0b3d91}
h3{font-size:16px;margin:14px 0 6px}h4{font-size:14px;margin:10px 0 4px}
.meta{color:#555;margin:2px 0}.note{color:#666;font-size:13px}
code,pre{font:12.5px/1.4 ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace}
pre{background:#f6f8fa;border:1px solid #e1e4e8;border-radius:4px;padding:8px;overflow:auto;max-height:480px;margin:4px 0}
pre.src{display:inline-block;padding:2px 6px;margin:2px 0;max-height:none}
table{border-collapse:collapse;margin:4px 0}td,th{border:1px solid #d0d7de;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#eef2f6}
section.frame{border:1px solid #c8d1dc;border-radius:6px;padding:12px 16px;margin:18px 0;background:#fcfdff}
.kind{font-size:13px;font-weight:normal;color:#fff;background:#6a7b90;border-radius:10px;padding:1px 8px;margin-left:6px}
.eager{background:#fff4e5;border-left:4px solid #f0a030;padding:4px 8px}
.error{background:#fdecea;border-left:4px solid #d9534f;padding:4px 8px}
.break{border-left:4px solid #d9534f;padding:2px 10px;margin:6px 0;background:#fff8f8}
.gbid{font:bold 13px ui-monospace,monospace;background:#d9534f;color:#fff;border-radius:3px;padding:1px 6px}
.hint{background:#eaf6ea;border-left:4px solid #3c9a3c;padding:3px 8px}
.recompiles li{margin:3px 0}
details.entry{border-top:1px dashed #c8d1dc;margin-top:10px;padding-top:6px}
details>summary{cursor:pointer;font-weight:600}
.cols{display:flex;gap:14px;flex-wrap:wrap}.col{flex:1 1 420px;min-width:0}
.rows .col{margin:6px 0}.svgbox{overflow:auto;max-height:900px;border:1px solid #e1e4e8;border-radius:4px;background:#fff}
svg.graph text{font:11px ui-monospace,"DejaVu Sans Mono",monospace;fill:#1b1f24}svg.graph text.n{font-weight:bold}
.op{color:#6a737d}.tools{margin:6px 0}
.hidden{display:none}
"""

_JS = """
(function(){
  document.body.setAttribute('data-js','ready');
  function all(open){document.querySelectorAll('details').forEach(function(d){d.open=open;});}
  var e=document.getElementById('expand'),c=document.getElementById('collapse'),f=document.getElementById('filter');
  if(e)e.onclick=function(){all(true);};
  if(c)c.onclick=function(){all(false);};
  if(f)f.oninput=function(){
    var q=f.value.toLowerCase();
    document.querySelectorAll('[data-label]').forEach(function(n){
      n.classList.toggle('hidden', q!=='' && n.getAttribute('data-label').toLowerCase().indexOf(q)<0);
    });
  };
})();
"""
