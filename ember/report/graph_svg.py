"""An fx graph drawn as inline SVG for the HTML report (standard library only, no graphviz).

Layered layout, top to bottom: a node's layer is one more than its deepest input's (longest
path from the placeholders); within a layer nodes are ordered by the mean position of their
inputs (two sweeps down, one up) to keep edges short and crossings few. Edges are cubic curves
from an input's bottom to a user's top. Graphs above ``MAX_NODES`` nodes get a compact listing
instead (``listing``): a drawing that size is not readable.
"""
from __future__ import annotations

import html

MAX_NODES = 150
BOX_W, BOX_H = 170, 34
GAP_X, GAP_Y = 18, 34
MARGIN = 10
LABEL_CHARS = 26

_FILL = {"placeholder": "#d9f2d9", "output": "#e6e6e6", "get_attr": "#fff2c6",
         "call_module": "#f2dcf5", "call_method": "#dbe9fb", "call_function": "#dbe9fb"}


def node_label(node) -> tuple[str, str]:
    """(first line: the node's name, second line: what it computes)."""
    op = node.op
    if op == "placeholder":
        what = "input"
    elif op == "output":
        what = "output"
    elif op == "get_attr":
        what = f"attr {node.target}"
    elif op == "call_method":
        what = f".{node.target}()"
    elif op == "call_module":
        what = f"module {node.target}"
    else:
        t = node.target
        what = getattr(t, "__name__", None) or str(t)
        mod = getattr(t, "__module__", "") or ""
        if mod.startswith("torch") and "." not in what:
            what = f"{'torch.' if mod == 'torch' else ''}{what}"
        if type(t).__name__ == "OpOverload":
            what = str(t)
    shape = getattr(node.meta.get("example_value", node.meta.get("val")), "shape", None)
    if shape is not None:
        what += " " + "[" + ",".join(str(d) for d in shape) + "]"
    return node.name, what


def _clip(s: str) -> str:
    return s if len(s) <= LABEL_CHARS else s[:LABEL_CHARS - 1] + "…"


def layout(nodes: list, inputs: dict) -> tuple[dict, int, int]:
    """Positions {node: (x, y)} of box top-left corners, and the drawing's width and height.
    ``inputs`` maps a node to the nodes it reads (all in ``nodes``)."""
    layer: dict = {}
    for n in nodes:  # fx graphs are topologically ordered
        layer[n] = 1 + max((layer[i] for i in inputs[n]), default=-1)
    # outputs at the bottom; inputs and attributes just above their first user (a module's
    # parameters would otherwise make one very wide first row)
    last = max(layer.values(), default=0)
    for n in nodes:
        if n.op == "output":
            layer[n] = last
    users: dict = {n: [] for n in nodes}
    for n in nodes:
        for i in inputs[n]:
            users[i].append(n)
    for n in nodes:
        if (n.op in ("placeholder", "get_attr") or not inputs[n]) and users[n]:
            layer[n] = max(0, min(layer[u] for u in users[n]) - 1)
    rows: list[list] = [[] for _ in range(last + 1)]
    for n in nodes:
        rows[layer[n]].append(n)
    pos = {n: float(k) for row in rows for k, n in enumerate(row)}

    def sweep(order, neighbours):
        for row in order:
            keyed = []
            for k, n in enumerate(row):
                nb = neighbours[n]
                keyed.append((sum(pos[m] for m in nb) / len(nb) if nb else pos[n], k, n))
            keyed.sort(key=lambda t: (t[0], t[1]))
            row[:] = [n for _, _, n in keyed]
            for k, n in enumerate(row):
                pos[n] = float(k)

    for _ in range(2):
        sweep(rows[1:], inputs)
        sweep(list(reversed(rows[:-1])), users)
    sweep(rows[1:], inputs)
    widest = max((len(r) for r in rows), default=1)
    width = 2 * MARGIN + widest * BOX_W + (widest - 1) * GAP_X
    xy = {}
    for r, row in enumerate(rows):
        row_w = len(row) * BOX_W + (len(row) - 1) * GAP_X
        x0 = MARGIN + (width - 2 * MARGIN - row_w) / 2
        for k, n in enumerate(row):
            xy[n] = (x0 + k * (BOX_W + GAP_X), MARGIN + r * (BOX_H + GAP_Y))
    height = 2 * MARGIN + len(rows) * BOX_H + (len(rows) - 1) * GAP_Y
    return xy, int(width), int(height)


def svg(gm) -> str:
    """The graph of ``gm`` (an fx GraphModule or Graph) as an ``<svg>`` element, or its compact
    listing (an HTML table) when it has more than ``MAX_NODES`` nodes."""
    graph = getattr(gm, "graph", gm)
    nodes = list(graph.nodes)
    if len(nodes) > MAX_NODES:
        return listing(gm, note=f"{len(nodes)} nodes: too many to draw, listed instead")
    present = set(nodes)
    inputs = {n: [i for i in n.all_input_nodes if i in present] for n in nodes}
    xy, width, height = layout(nodes, inputs)
    esc = html.escape
    out = [f'<svg class="graph" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="graph drawing, {len(nodes)} nodes">',
           '<defs><marker id="arr" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
           'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#667"/>'
           '</marker></defs>']
    for n in nodes:
        x1, y1 = xy[n]
        for i in inputs[n]:
            x0, y0 = xy[i]
            ax, ay = x0 + BOX_W / 2, y0 + BOX_H
            bx, by = x1 + BOX_W / 2, y1
            mid = (ay + by) / 2
            out.append(f'<path d="M{ax:.0f},{ay:.0f} C{ax:.0f},{mid:.0f} {bx:.0f},{mid:.0f} {bx:.0f},{by:.0f}" '
                       'fill="none" stroke="#667" stroke-width="1.2" marker-end="url(#arr)"/>')
    for n in nodes:
        x, y = xy[n]
        name, what = node_label(n)
        fill = _FILL.get(n.op, "#dbe9fb")
        out.append(f'<g><title>{esc(name)}: {esc(what)}\n{esc(n.format_node() or "")}</title>'
                   f'<rect x="{x:.0f}" y="{y:.0f}" width="{BOX_W}" height="{BOX_H}" rx="5" fill="{fill}" '
                   'stroke="#556"/>'
                   f'<text x="{x + 6:.0f}" y="{y + 14:.0f}" class="n">{esc(_clip(name))}</text>'
                   f'<text x="{x + 6:.0f}" y="{y + 28:.0f}" class="t">{esc(_clip(what))}</text></g>')
    out.append("</svg>")
    return "\n".join(out)


def listing(gm, note: str = "") -> str:
    """A compact table of the graph's nodes: name, op, what it computes, its inputs."""
    graph = getattr(gm, "graph", gm)
    esc = html.escape
    rows = [f'<p class="note">{esc(note)}</p>' if note else "",
            '<table class="listing"><tr><th>node</th><th>op</th><th>computes</th><th>inputs</th></tr>']
    for n in graph.nodes:
        name, what = node_label(n)
        ins = ", ".join(i.name for i in n.all_input_nodes)
        rows.append(f"<tr><td>{esc(name)}</td><td>{esc(n.op)}</td><td>{esc(what)}</td><td>{esc(ins)}</td></tr>")
    rows.append("</table>")
    return "\n".join(rows)
