"""The server's API tokens (HOPRAG_API_TOKENS_FILE, HOPRAG_API_TOKENS): who may call it.

Tokens live outside the repository, in a file only its owner can read or in the
environment; each names a user (`name:token`, or a bare `token` named after a digest of
it), and that name owns the threads the token makes (graph/auth.py). Only names are ever
shown or stored, never tokens.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import stat
from pathlib import Path

from app.errors import UserError
from app.settings import MIN_TOKEN_CHARS, TOKEN_NAME_PATTERN, Settings

REPOSITORY = Path(__file__).resolve().parents[1]


def parse_tokens(
    entries: list[str], where: str, into: dict[str, str] | None = None
) -> dict[str, str]:
    """Each token with its user's name, from `name:token` or bare `token` entries (blank
    ones and `#` comments skipped), added to `into`; a malformed or short entry, or a
    user or token already there, is refused."""
    tokens = dict(into or {})
    for number, raw in enumerate(entries, 1):
        entry = raw.strip()
        if not entry or entry.startswith("#"):
            continue
        name, sep, token = entry.partition(":")
        if not sep:
            name, token = f"token-{hashlib.sha256(entry.encode()).hexdigest()[:8]}", entry
        if not re.fullmatch(TOKEN_NAME_PATTERN, name):
            raise UserError(
                f"{where}, entry {number}: user name {name[:40]!r} is not a name",
                hint="write name:token, the name of letters, digits and _.@-",
            )
        if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
            raise UserError(
                f"{where}, entry {number} ({name}): a token is at least {MIN_TOKEN_CHARS} "
                "characters without spaces",
                hint='make one with: python -c "import secrets; print(secrets.token_urlsafe())"',
            )
        if token in tokens or name in tokens.values():
            raise UserError(f"{where}, entry {number}: user {name} or its token appears twice")
        tokens[token] = name
    return tokens


def _read_file(path: Path) -> list[str]:
    """The file's lines, once it is shown to be private and outside the repository."""
    if not path.is_absolute():  # `hoprag serve` starts the server in the repository
        raise UserError(
            f"HOPRAG_API_TOKENS_FILE={path} is not a full path",
            hint="name it from / or ~, such as ~/.config/hoprag/tokens",
        )
    if path.resolve().is_relative_to(REPOSITORY):
        raise UserError(
            f"HOPRAG_API_TOKENS_FILE={path} is inside the repository",
            hint="keep tokens out of the repository, such as in ~/.config/hoprag/tokens",
        )
    try:
        mode = path.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise UserError(
                f"HOPRAG_API_TOKENS_FILE={path} is open to other users "
                f"(mode {stat.S_IMODE(mode):o})",
                hint=f"chmod 600 {path}",
            )
        return path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(
            f"cannot read HOPRAG_API_TOKENS_FILE={path}: {getattr(exc, 'strerror', exc)}"
        ) from None


def load_tokens(settings: Settings) -> dict[str, str]:
    """Every configured token with its user's name (empty: none configured)."""
    tokens = parse_tokens(settings.api_tokens.split(","), "HOPRAG_API_TOKENS")
    if settings.api_tokens_file is not None:
        path = Path(settings.api_tokens_file)
        tokens = parse_tokens(_read_file(path), f"HOPRAG_API_TOKENS_FILE={path}", tokens)
    return tokens


def user_of(tokens: dict[str, str], presented: str) -> str | None:
    """The name of the user whose token was presented, compared in constant time."""
    found = None
    for token, name in tokens.items():
        if hmac.compare_digest(token.encode(), presented.encode()):
            found = name
    return found
