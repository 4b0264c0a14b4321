"""The README's picture of the DeFT graph, drawn by LangGraph from the compiled graph.

python -m graph.diagram            print the mermaid diagram
python -m graph.diagram --write    refresh it in README.md (a test checks it is current)
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from types import SimpleNamespace

from graph.deft import HOP, build_deft

README = Path(__file__).resolve().parents[1] / "README.md"
BEGIN, END = "<!-- deft-graph:begin -->", "<!-- deft-graph:end -->"


def deft_mermaid() -> str:
    """Compile the DeFT graph with placeholder resources (drawing runs no node) and a
    sentence graph present, so the expansion step is in the picture, and draw it with the
    hop subgraph's nodes inside it. Edges only: GitHub draws the nodes from them, and the
    README stays short. LangGraph names an inner node `hop\\3a<node>` (an escaped colon);
    the picture shows `<node>` inside the `hop` box, and the hop's end as `hop_done`."""
    placeholders = SimpleNamespace(
        settings=None,
        gateway=None,
        index=None,
        retriever=None,
        dm=None,
        qa_cache=None,
        examples=None,
        sentence_graph=object(),
    )
    graph = build_deft(placeholders).get_graph(xray=1)  # type: ignore[arg-type]
    mermaid = graph.draw_mermaid(with_styles=False).strip()
    mermaid = mermaid.replace(f"{HOP}\\3a__end__", f"{HOP}_done")
    return mermaid.replace(f"{HOP}\\3a", "")


def readme_block(mermaid: str) -> str:
    return f"{BEGIN}\n```mermaid\n{mermaid}\n```\n{END}"


def current_block(readme: str) -> str | None:
    """The diagram block the README holds now, None when it has no markers."""
    found = re.search(re.escape(BEGIN) + r".*?" + re.escape(END), readme, re.S)
    return found.group(0) if found else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="refresh the diagram in README.md")
    args = parser.parse_args()
    mermaid = deft_mermaid()
    if not args.write:
        print(mermaid)
        return
    readme = README.read_text()
    old = current_block(readme)
    if old is None:
        raise SystemExit(f"{README} has no {BEGIN} ... {END} block to refresh")
    README.write_text(readme.replace(old, readme_block(mermaid)))
    print(f"refreshed the DeFT graph in {README}")


if __name__ == "__main__":
    main()
