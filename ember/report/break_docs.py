"""Write ``docs/graph_breaks.md`` from the graph-break registry.

    python -m ember.report.break_docs            # rewrite docs/graph_breaks.md
    python -m ember.report.break_docs --check    # exit 1 if the committed page is out of date
"""
from __future__ import annotations

import pathlib
import sys

from ember.capture.break_registry import render_markdown

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "graph_breaks.md"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = render_markdown()
    if "--check" in argv:
        same = DOC.exists() and DOC.read_text() == text
        if not same:
            print(f"{DOC} is out of date: run python -m ember.report.break_docs", file=sys.stderr)
        return 0 if same else 1
    DOC.write_text(text)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
