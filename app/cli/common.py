"""What the command groups share: the group with a default command, common options,
settings with command-line overrides, and plain tables."""

from __future__ import annotations

from typing import Annotated, Any

import click
import typer
from typer.core import TyperGroup

from app.settings import Settings


class DefaultCommandGroup(TyperGroup):
    """A group whose first command runs when the first word is not a subcommand, so that
    `hoprag index PATH --name N` builds while `hoprag index list` lists, and
    `hoprag eval --data ...` runs while `hoprag eval compare` compares."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        default = next(iter(self.commands), None)
        if default and args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = [default, *args]
        return super().parse_args(ctx, args)


ModelOpt = Annotated[
    str | None, typer.Option("--model", "-m", help="Chat model (default: HOPRAG_MODEL).")
]


IndexOpt = Annotated[
    str | None, typer.Option("--index", "-i", help="Index (default: HOPRAG_INDEX).")
]


def load_settings(**overrides: Any) -> Settings:
    return Settings().with_overrides(**overrides)


def print_table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns}
    typer.echo("  ".join(c.upper().ljust(widths[c]) for c in columns))
    for row in rows:
        typer.echo("  ".join(str(row.get(c, "")).ljust(widths[c]) for c in columns))
