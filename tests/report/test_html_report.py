"""The HTML report (``ember.report.html`` / ``python -m ember report``): its sections on a program
with a graph break, a recompile and resume functions, escaping, the SVG drawing, the CLI end to
end, and the page in headless Chromium (Debian's ``chromium``; see ``chromium`` fixture)."""
import html
import html.parser
import inspect
import os
import re
import shutil
import struct
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import pytest
import torch

import ember
from ember.capture.break_registry import lookup
from ember.report import graph_svg, html_report

REPO = Path(__file__).resolve().parents[2]


def helper(x, n):
    if n > 2:
        return x * n
    return x - n


def with_break(x, n):
    y = torch.sin(x) + 1
    print("break <tag> & more")
    z = helper(y, n)
    return z.cos() if (x < 3).all() else z


def other(a, b):
    return (a @ b).relu() + a.sum()


HELPER_LINE = inspect.getsourcelines(helper)[1] + 1           # if n > 2:
PRINT_LINE = inspect.getsourcelines(with_break)[1] + 2        # print(...)
BRANCH_LINE = inspect.getsourcelines(with_break)[1] + 4       # return z.cos() if (x < 3).all() else z


def run_program():
    """Two compiled functions, one with two graph breaks (print, a data-dependent branch) whose
    resume function recompiles on ``n``. Outputs match eager."""
    f = ember.compile(with_break, backend="aot_eager")
    g = ember.compile(other, backend="aot_eager")
    for n in (3, 4):
        x = torch.randn(4)
        torch.testing.assert_close(f(x, n), with_break(x, n))
    a, b = torch.randn(3, 3), torch.randn(3, 3)
    torch.testing.assert_close(g(a, b), other(a, b))
    return f, g


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    ember.reset()
    keep = run_program()  # (the compiled functions stay alive while the report is made)
    path = tmp_path_factory.mktemp("report") / "r.html"
    ember.report.html(str(path))
    frames = html_report.frames()
    text = path.read_text(encoding="utf-8")
    del keep
    return text, frames


def sections(text, cls):
    return re.findall(rf'<(?:section|div|details) class="{cls}"', text)


def test_one_section_per_compiled_function(report):
    text, frames = report
    labels = [f.label for f in frames]
    assert "with_break" in labels and "other" in labels
    assert any(lab.startswith("with_break:resume_at_") for lab in labels)
    assert len(sections(text, "frame")) == len(frames) >= 3
    for i, f in enumerate(frames):
        assert f'id="frame-{i}"' in text and f'href="#frame-{i}"' in text
        assert html.escape(f.label) in text
    assert '<section id="summary">' in text
    assert len(sections(text, "compiles")) == len(frames)


def test_graph_break_with_id_hint_and_line(report):
    text, _ = report
    for gid, line in (("EB0026", PRINT_LINE), ("EB0016", BRANCH_LINE)):
        kind = lookup(gid)
        assert f'<span class="gbid">{gid}</span>' in text
        assert html.escape(kind.hint) in text and html.escape(kind.explanation) in text
        assert f"{Path(__file__).name}:{line}" in text
    assert html.escape('print("break <tag> & more")') in text
    assert html.escape("return z.cos() if (x < 3).all() else z") in text


def test_recompile_names_guard_and_line(report):
    text, frames = report
    resumed = [f for f in frames if f.recompile_reasons]
    assert len(resumed) == 1
    reason = resumed[0].recompile_reasons[0]
    assert "L['n'] == 3 (now: 4)" in reason and f":{HELPER_LINE} in helper" in reason and "if n > 2:" in reason
    block = text[text.index('<div class="recompiles">'):]
    block = block[:block.index("</div>")]
    assert html.escape(reason) in block
    # the compiles table gives the second compile's reason too
    assert "recompile: " + html.escape(reason) in text


def test_guards_with_provenance(report):
    text, frames = report
    f = next(f for f in frames if f.recompile_reasons)
    guard = next(g for e in f.entries for g in e.guards.ordered() if g.text == "L['n'] == 3")
    p = guard.provenance
    assert p.lineno == HELPER_LINE and p.source_line == "if n > 2:"
    row = f"<td><code>{html.escape(guard.text)}</code></td><td><code>{html.escape(p.where)}</code> in helper"
    assert row in text
    assert html.escape(p.operation) in text
    guards_total = sum(len(e.guards.ordered()) for fr in frames for e in fr.entries)
    assert text.count("<tr><td>") >= guards_total > 0


def test_svg_drawing_per_graph(report):
    text, frames = report
    graphs = [e.graph for f in frames for e in f.entries if e.graph is not None]
    svgs = re.findall(r'<svg class="graph".*?</svg>', text, flags=re.S)
    assert len(svgs) == len(graphs) >= 3
    for s, gm in zip(svgs, graphs):
        root = ET.fromstring(s)  # well-formed XML
        ns = "{http://www.w3.org/2000/svg}"
        nodes = list(gm.graph.nodes)
        assert len(root.findall(f".//{ns}rect")) == len(nodes)
        assert len(root.findall(f"./{ns}path")) == sum(len(n.all_input_nodes) for n in nodes)
        texts = [t.text for t in root.iter(f"{ns}text")]
        assert all(n.name[:graph_svg.LABEL_CHARS - 1] in "".join(texts) for n in nodes)
        assert 'class="code">' in text and html.escape(gm.print_readable(print_output=False)) in text


def test_resume_code_python_and_bytecode(report):
    text, frames = report
    resumes = [f for f in frames if f.kind == "resume function"]
    assert resumes and len(sections(text, "resume")) == len(resumes)
    for f in resumes:
        code = f.cache.fn.__code__
        assert f"{code.co_name}" in text
        src = html_report.decompile(code)
        if src is not None:  # depyf installed (the test extra)
            assert f"def {code.co_name}(" in src
            assert html.escape(src) in text
    assert "LOAD_FAST" in text and "RETURN_VALUE" in text
    try:
        import depyf  # noqa: F401
    except ImportError:
        assert "install the optional <code>depyf</code>" in text


def test_resume_code_without_depyf_falls_back_to_dis(monkeypatch):
    code = with_break.__code__
    monkeypatch.setitem(sys.modules, "depyf", None)  # import fails
    assert html_report.decompile(code) is None
    out = html_report._resume_code(code)
    assert "install the optional <code>depyf</code>" in out and "LOAD_GLOBAL" in out


class _Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)


def test_user_text_is_escaped(report):
    text, _ = report
    assert "<tag>" not in text and "&lt;tag&gt;" in text
    assert "(x < 3)" not in text and "(x &lt; 3)" in text
    p = _Tags()
    p.feed(text)
    made = {"html", "head", "meta", "title", "style", "body", "script", "h1", "h2", "h3", "h4", "p",
            "b", "code", "pre", "div", "section", "table", "tr", "th", "td", "a", "span", "input",
            "button", "details", "summary", "ol", "li", "svg", "defs", "marker", "path", "g", "rect",
            "text"}
    assert p.tags <= made, p.tags - made
    assert "https://" not in text.replace("http://www.w3.org/2000/svg", "") and "<link" not in text


def test_layout_inputs_above_users_no_overlap():
    g = torch.fx.Graph()
    xs = [g.placeholder(f"x{i}") for i in range(6)]
    acc = xs[0]
    for i in range(100):
        acc = g.call_function(torch.add, (acc, xs[i % 6]))
    g.output(acc)
    nodes = list(g.nodes)
    inputs = {n: list(n.all_input_nodes) for n in nodes}
    xy, w, h = graph_svg.layout(nodes, inputs)
    for n in nodes:
        for i in inputs[n]:
            assert xy[i][1] < xy[n][1]
    boxes = sorted(xy.values())
    assert len(set(boxes)) == len(boxes)
    for (x0, y0), (x1, y1) in zip(boxes, boxes[1:]):
        assert x0 != x1 or abs(y0 - y1) >= graph_svg.BOX_H
    assert all(0 <= x <= w - graph_svg.BOX_W and 0 <= y <= h - graph_svg.BOX_H for x, y in boxes)
    assert w <= 6 * (graph_svg.BOX_W + graph_svg.GAP_X) + 2 * graph_svg.MARGIN  # readable: not 100 wide
    assert graph_svg.svg(g).startswith("<svg")


def test_big_graph_gets_a_listing():
    g = torch.fx.Graph()
    acc = g.placeholder("x")
    for _ in range(graph_svg.MAX_NODES):
        acc = g.call_function(torch.neg, (acc,))
    g.output(acc)
    out = graph_svg.svg(g)
    assert "<svg" not in out and '<table class="listing">' in out
    assert out.count("<tr>") == len(g.nodes) + 1


# -- the CLI ------------------------------------------------------------------------------------

SCRIPT = '''
import sys, json, torch, ember

def step(x, k):
    y = x * 2
    print("mid <b>")
    return y + k if k < 5 else y

if __name__ == "__main__":
    f = ember.compile(step, backend="eager")
    for k in (1, 2):
        f(torch.ones(3), k)
    with open(sys.argv[1], "w") as out:
        json.dump({"argv": sys.argv, "name": __name__}, out)
    if len(sys.argv) > 2:
        raise ValueError(sys.argv[2])
'''


def run_cli(tmp_path, *args):
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("EMBER_TRACE", None)
    return subprocess.run([sys.executable, "-m", "ember", "report", "-o", str(tmp_path / "out.html"),
                           str(script), *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)


def test_cli_runs_script_and_writes_report(tmp_path):
    """End to end in a fresh process (~5-10 s: torch's import and one compile)."""
    import json
    r = run_cli(tmp_path, str(tmp_path / "seen.json"))
    assert r.returncode == 0, r.stderr
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen == {"argv": [str(tmp_path / "prog.py"), str(tmp_path / "seen.json")], "name": "__main__"}
    text = (tmp_path / "out.html").read_text()
    assert "ember report: prog.py" in text and "report written to" in r.stderr
    assert '<section class="frame"' in text and ">step<" in text
    assert '<span class="gbid">EB0026</span>' in text and "mid &lt;b&gt;" in text
    assert "L[&#x27;k&#x27;] == 1 (now: 2)" in text  # the resume function recompiles on k
    assert "aot_" not in text  # backend eager: no AOT graphs
    assert not list(tmp_path.glob("dedicated_log_*"))


def test_cli_script_raising_still_reports(tmp_path, monkeypatch, capsys):
    """In this process: the script's exception is printed, the status is 1, the report is written
    with the traceback; the trace the command turned on is off again, argv restored."""
    from ember import trace_log
    from ember.report.cli import main
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    argv = list(sys.argv)
    out = tmp_path / "out.html"
    assert trace_log.writer is None
    assert main(["report", "-o", str(out), str(script), str(tmp_path / "seen.json"), "boom <x>"]) == 1
    assert "ValueError: boom <x>" in capsys.readouterr().err
    assert sys.argv == argv and trace_log.writer is None
    text = out.read_text()
    assert "ValueError: boom &lt;x&gt;" in text and '<section class="frame"' in text and ">step<" in text
    ember.reset()  # (the report shows everything compiled in the process since the last reset)
    script.write_text("import sys\nsys.exit(3)\n")
    assert main(["report", "-o", str(out), str(script)]) == 3
    assert "Nothing was compiled" in out.read_text()


def test_cli_missing_script(tmp_path, capsys):
    from ember.report.cli import main
    assert main(["report", str(tmp_path / "nope.py")]) == 2
    assert "no such file" in capsys.readouterr().err


# -- headless Chromium ---------------------------------------------------------------------------

def _find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


@pytest.fixture(scope="session")
def chromium():
    """Debian's chromium; installed with apt-get when missing, only as root under CI or
    EMBER_INSTALL_CHROMIUM=1 (measured: apt-get update + install ~2.5 min on the CI machine)."""
    found = _find_chromium()
    if found:
        return found
    allowed = os.environ.get("CI", "").lower() in ("1", "true", "yes") \
        or os.environ.get("EMBER_INSTALL_CHROMIUM") == "1"
    if not allowed:
        pytest.skip("chromium not installed (set EMBER_INSTALL_CHROMIUM=1, as root, to install it)")
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("chromium not installed and cannot be: installing needs root and apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    start = time.perf_counter()
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
        try:
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        except (OSError, subprocess.TimeoutExpired) as e:
            pytest.skip(f"could not install chromium: {' '.join(cmd)}: {e}")
        if r.returncode != 0:
            pytest.skip(f"could not install chromium: {' '.join(cmd)} failed: {r.stderr[-300:]}")
    print(f"installed chromium in {time.perf_counter() - start:.0f} s")
    found = _find_chromium()
    if not found:
        pytest.skip("chromium installed but not found on PATH")
    return found


def png_pixels(data: bytes):
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB/RGBA PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and color in (2, 6)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def test_report_in_headless_chromium(chromium, report, tmp_path):
    text, frames = report
    page = tmp_path / "report.html"
    page.write_text(text, encoding="utf-8")
    shot = tmp_path / "shot.png"
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--user-data-dir={tmp_path / 'profile'}"]
    url = page.as_uri()
    r = subprocess.run(flags + ["--dump-dom", url], capture_output=True, text=True, timeout=60)
    dom = r.stdout
    assert r.returncode == 0 and dom, r.stderr[-500:]
    assert 'data-js="ready"' in dom  # the inline script ran
    assert '<section id="summary">' in dom and dom.count('<section class="frame"') == len(frames)
    for cls in ("breaks", "recompiles", "guards", "resume", "compiles"):
        assert f'class="{cls}"' in dom
    assert dom.count('<svg class="graph"') >= 3 and "EB0016" in dom
    r = subprocess.run(flags + [f"--screenshot={shot}", "--window-size=1280,2000", url],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and shot.exists(), r.stderr[-500:]
    data = shot.read_bytes()
    assert len(data) > 20_000
    w, h, bpp, rows = png_pixels(data)
    assert (w, h) == (1280, 2000)
    colours, ink = set(), 0
    for row in rows[::8]:
        for x in range(0, w * bpp, bpp * 4):
            px = row[x:x + 3]
            colours.add(px)
            ink += px != b"\xff\xff\xff"
    assert len(colours) > 50  # text, boxes, badges: not a blank or one-colour page
    assert ink > 0.05 * (h // 8) * (w // 4)


def grows(x):
    return x * 2


def test_function_that_runs_eagerly_is_reported(tmp_path):
    """A function past config.recompile_limit: its compiles, its recompiles, and why it now runs
    eagerly (the page still matches what the cache says)."""
    import warnings
    f = ember.compile(grows, backend="eager")
    with ember.config.patch(recompile_limit=2), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dtype in (torch.float32, torch.float64, torch.int32, torch.int64):
            x = torch.ones(2, dtype=dtype)
            torch.testing.assert_close(f(x), grows(x))
    path = ember.report.html(str(tmp_path / "r.html"))
    text = Path(path).read_text()
    (frame,) = [fr for fr in html_report.frames() if fr.label == "grows"]
    assert frame.run_eagerly_reason and "recompile limit (2)" in frame.run_eagerly_reason
    assert f'<p class="eager">Runs eagerly: {html.escape(frame.run_eagerly_reason)}</p>' in text
    assert len(frame.compiles) == 2 and len(frame.recompile_reasons) == 1
    assert "L['x']" in frame.recompile_reasons[0] and html.escape(frame.recompile_reasons[0]) in text
    assert '<details class="source">' in text and html.escape("return x * 2") in text


def test_a_function_that_fails_to_render_leaves_a_note(tmp_path, monkeypatch):
    f = ember.compile(grows, backend="eager")
    torch.testing.assert_close(f(torch.ones(2)), grows(torch.ones(2)))

    def broken(entry):
        raise RuntimeError("no <guards>")
    monkeypatch.setattr(html_report, "_guards", broken)
    text = Path(ember.report.html(str(tmp_path / "r.html"))).read_text()
    assert "could not render this function: RuntimeError: no &lt;guards&gt;" in text
    assert '<section id="summary">' in text and text.rstrip().endswith("</html>")
