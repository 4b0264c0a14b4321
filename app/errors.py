"""User-facing errors: one clear line, a hint, a non-zero exit, no traceback."""

from __future__ import annotations

import sys
from typing import NoReturn


class UserError(ValueError):
    """Something the user can fix (bad input, missing model, unknown index). A ValueError,
    so that LangGraph Server shows its message to the client instead of hiding it."""

    exit_code = 2

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class ServiceError(UserError):
    """A model server or endpoint that does not answer, or answers garbage."""

    exit_code = 3


def exit_with(exc: UserError) -> NoReturn:
    """What every entry point does with a user error: one line, the hint, the exit code."""
    print(f"error: {exc.message}", file=sys.stderr)
    if exc.hint:
        print(f"  hint: {exc.hint}", file=sys.stderr)
    sys.exit(exc.exit_code)
