"""The README's DeFT diagram is the compiled graph's own drawing, kept current."""

from __future__ import annotations

from graph.diagram import README, current_block, deft_mermaid, readme_block


def test_readme_diagram_is_the_compiled_graph() -> None:
    mermaid = deft_mermaid()
    # The drawing has the named routes, the graph walk included, and the hop subgraph's
    # steps inside its box.
    for edge in (
        "check_direct_answer -.-> answer_directly",
        "filter_relevant -.-> expand_from_graph",
        "check_sufficiency -.-> write_sub_question",
        "hop_done -.-> check_sufficiency",
        "update_qa_table --> hop_done",
        "reply --> __end__",
    ):
        assert edge in mermaid
    inside = mermaid.split("subgraph hop", 1)[1]
    assert "lookup_qa_cache -.-> retrieve_for_sub_question" in inside
    assert "check_sufficiency" not in inside and "\\3a" not in mermaid
    assert current_block(README.read_text()) == readme_block(mermaid), (
        "README.md's DeFT diagram is stale: run `python -m graph.diagram --write`"
    )
