"""Chat messages as text: what the turn's question and the history a follow-up is
rewritten from read."""

from __future__ import annotations

from langchain_core.messages import AnyMessage


def message_text(message: AnyMessage) -> str:
    """A message's text, also when it came as a list of content blocks."""
    content = message.content
    if isinstance(content, str):
        return content
    return " ".join(
        str(block.get("text", "")) if isinstance(block, dict) else str(block) for block in content
    )
