"""Documents into passages: PDF, HTML, Word, Markdown and plain text.

A document is split by its own structure first (headings and their sections; a PDF's
bookmarked headings, its pages kept for citations), then each section to a target size
at sentence ends. A passage's title is its own heading (the document's title where it has
none): titles carry the entity names that retrieval and the decision model rely on, and
the trained DM, fitted on encyclopedia titles, reads a heading path as another topic.
Every passage keeps its source (file, section path, the page it starts on, character
offsets in the document's extracted text), which citations show in full.

The formats are read by maintained libraries: pypdf (text per page, the outline for
headings), trafilatura (an HTML page's main text and headings, as Markdown), python-docx
(paragraphs and heading styles), markdown-it-py (CommonMark headings, so that a `#` in a
code block is no heading) and spaCy's rule-based sentencizer for sentence ends. A section
of up to four times the target size (a long encyclopedia paragraph) is one passage; a
longer one is cut at sentence ends into even pieces, each a slice of the document's own
text. A document that cannot be read is
skipped with one line naming it and why; the others are still indexed.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from functools import cache
from itertools import accumulate, pairwise
from pathlib import Path
from typing import Any

from app.errors import UserError

DOCUMENT_SUFFIXES = (".md", ".markdown", ".txt", ".html", ".htm", ".pdf", ".docx")
SECTION_SEP = " \u203a "  # "Regional handbook > Tavistrom College", with a single guillemet
_BINARY_PROBE = 8192  # bytes read to tell text from binary
_HEADING_STYLE = re.compile(r"^heading (\d)$", re.IGNORECASE)
WHOLE_SECTION = 4  # a section of up to this many times the target size is one passage
_MARKDOWN_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!<>|~])")


class DocumentSkipped(Exception):
    """A document that is not indexed; the message says why, for a warning line."""


@dataclass(frozen=True)
class Source:
    """Where a passage comes from inside a document."""

    file: str  # relative to the indexed folder (or the file's own name)
    section: tuple[str, ...] = ()
    page: int | None = None
    start: int = 0  # character offsets in the document's extracted text
    end: int = 0

    def cite(self) -> str:
        """The file, its section path and the page: "handbook2.md > Tavistrom College, p. 3"
        (with `SECTION_SEP`)."""
        where = SECTION_SEP.join([self.file, *self.section])
        return f"{where}, p. {self.page}" if self.page else where

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "section": list(self.section)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Source:
        return cls(**{**data, "section": tuple(data.get("section") or ())})


def format_citations(citations: list[dict[str, Any]]) -> str:
    """Citations on one line, "[3] handbook2.md > Tavistrom College, p. 2; [7] ..." with
    `SECTION_SEP` (threads from before sources were kept cite by title)."""
    return "; ".join(f"[{c['id']}] {c.get('cite') or c['title']}" for c in citations)


@dataclass(frozen=True)
class Block:
    """One structural unit of a document: a section's text."""

    section: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class Extracted:
    """What a reader made of a document: its title if it names one, its whole text as
    extracted (what source offsets count in), its blocks in order, and where in that
    text each page starts (paged formats). `paragraphs`: the blocks are paragraphs of
    unstructured text, which chunking joins up to the target size."""

    title: str | None
    text: str
    blocks: list[Block]
    page_starts: tuple[int, ...] = ()
    paragraphs: bool = False

    def page_at(self, offset: int) -> int | None:
        """The page (from 1) that the text at `offset` is on."""
        return bisect.bisect_right(self.page_starts, offset) or None


@dataclass(frozen=True)
class Chunk:
    """A passage cut from a document: its title, its text and where it comes from."""

    title: str
    text: str
    source: Source


# -- Reading each format into blocks ------------------------------------------------------


def _decode(raw: bytes, name: str, warn: Callable[[str], None]) -> str:
    if b"\x00" in raw[:_BINARY_PROBE]:
        raise DocumentSkipped("binary data, not text")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        warn(f"{name}: not UTF-8, read as Windows-1252 (some characters may be wrong)")
        return raw.decode("cp1252", errors="replace")


def _markdown_blocks(text: str) -> Extracted:
    """Sections under Markdown headings, each its own block: two sections in a row under
    the same heading stay two (a header splitter that groups lines by their heading path
    joins them). A lone top heading is the document's title."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(text)
    headings = [  # (level, heading text, first line, line after the heading)
        (int(tokens[i].tag[1]), tokens[i + 1].content.strip(), *tokens[i].map)
        for i, token in enumerate(tokens)
        if token.type == "heading_open" and token.map
    ]
    lines = text.splitlines(keepends=True)
    title = None
    levels = [level for level, *_ in headings]
    if levels[:1] == [1] and levels.count(1) == 1:  # one top heading: the title
        title = headings[0][1]
    path: list[tuple[int, str]] = []
    blocks = [Block((), "".join(lines[: headings[0][2] if headings else len(lines)]))]
    for n, (level, heading, _, body) in enumerate(headings):
        path = [(lvl, h) for lvl, h in path if lvl < level] + [(level, heading)]
        end = headings[n + 1][2] if n + 1 < len(headings) else len(lines)
        section = tuple(h for lvl, h in path if not (title and lvl == 1))
        blocks.append(Block(section, "".join(lines[body:end])))
    return Extracted(title, text, [b for b in blocks if b.text.strip()])


def _read_markdown(path: Path, warn: Callable[[str], None]) -> Extracted:
    return _markdown_blocks(_decode(path.read_bytes(), path.name, warn))


def _read_text(path: Path, warn: Callable[[str], None]) -> Extracted:
    """Paragraphs (at blank lines), which chunking joins up to the target size."""
    text = _decode(path.read_bytes(), path.name, warn)
    paragraphs = [Block((), p) for p in re.split(r"\n\s*\n", text) if p.strip()]
    return Extracted(None, text, paragraphs, paragraphs=True)


def _read_html(path: Path, warn: Callable[[str], None]) -> Extracted:
    """The page's main text and headings (no menus or footers), as Markdown sections."""
    import trafilatura

    page = _decode(path.read_bytes(), path.name, warn)
    text = trafilatura.extract(
        page, output_format="markdown", include_formatting=True, favor_recall=True
    )
    if not text:
        raise DocumentSkipped("no main text found in the page")
    extracted = _markdown_blocks(text)
    meta = trafilatura.extract_metadata(page)
    blocks = [Block(tuple(map(_unescape, b.section)), _unescape(b.text)) for b in extracted.blocks]
    title = meta.title if meta and meta.title else extracted.title
    return Extracted(title, _unescape(extracted.text), blocks)


def _unescape(markdown: str) -> str:
    """Text without the backslashes trafilatura's Markdown puts before characters that
    Markdown would read as formatting ("\\_", "\\<"); the page shows none."""
    return _MARKDOWN_ESCAPE.sub(r"\1", markdown)


def _read_docx(path: Path, warn: Callable[[str], None]) -> Extracted:
    """Paragraphs grouped under their heading styles (Heading 1, Heading 2, ...)."""
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        document = docx.Document(str(path))
    except (PackageNotFoundError, ValueError, KeyError) as exc:
        raise DocumentSkipped(f"not a readable Word document ({exc})") from None
    title = document.core_properties.title or None
    blocks: list[Block] = []
    section: list[str] = []
    lines: list[str] = []

    def close() -> None:
        if any(line.strip() for line in lines):
            blocks.append(Block(tuple(section), "\n\n".join(lines)))

    for paragraph in document.paragraphs:
        style = paragraph.style.name if paragraph.style is not None else ""
        text = paragraph.text.strip()
        level = _HEADING_STYLE.match(style)
        if style == "Title" and text:
            title = title or text
        elif level and text:
            close()
            depth = int(level.group(1))
            section = [*section[: depth - 1], text]
            lines = []
        elif text:
            lines.append(text)
    close()
    return Extracted(title, "\n".join(p.text for p in document.paragraphs), blocks)


def _outline(reader: Any) -> dict[int, list[tuple[int, str]]]:
    """The PDF's bookmarks by page: (depth, title) in order."""
    by_page: dict[int, list[tuple[int, str]]] = {}

    def walk(items: list[Any], depth: int) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item, depth + 1)
                continue
            try:
                page = reader.get_destination_page_number(item)
            except Exception:  # a bookmark to nowhere is no heading
                continue
            by_page.setdefault(page, []).append((depth, str(item.title).strip()))

    try:
        walk(reader.outline, 0)
    except Exception:  # a damaged outline: pages alone
        return {}
    return by_page


def _read_pdf(path: Path, warn: Callable[[str], None]) -> Extracted:
    """Text per page; the outline's titles, where they start a line, open sections. A
    section runs on across pages, so that a sentence broken by a page is whole."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted and not reader.decrypt(""):
            raise DocumentSkipped("encrypted PDF (a password is needed)")
        pages = [page.extract_text() or "" for page in reader.pages]
        outline = _outline(reader)
        info = reader.metadata
    except DocumentSkipped:
        raise
    except (PdfReadError, OSError, ValueError, KeyError, TypeError) as exc:
        raise DocumentSkipped(f"damaged PDF ({type(exc).__name__}: {exc})") from None
    if not any(page.strip() for page in pages):
        raise DocumentSkipped("the PDF has no text layer (a scan?); run OCR first")
    blocks: list[Block] = []
    section: list[str] = []
    lines: list[str] = []
    heads: list[tuple[int, str]] = []  # bookmarks not met yet: a heading can fall to the
    for number, page in enumerate(pages):  # next page after its bookmark was set
        heads += outline.get(number, [])
        for line in page.splitlines():
            match = next((h for h in heads if line.strip() == h[1]), None)
            if match is None:
                lines.append(line)
                continue
            if any(x.strip() for x in lines):
                blocks.append(Block(tuple(section), "\n".join(lines)))
            depth, head = match
            heads = heads[heads.index(match) + 1 :]
            section = [*section[:depth], head]
            lines = []
    if any(x.strip() for x in lines):
        blocks.append(Block(tuple(section), "\n".join(lines)))
    title = str(info.title).strip() if info is not None and info.title else None
    starts = [0]
    for page in pages[:-1]:
        starts.append(starts[-1] + len(page) + 1)
    return Extracted(title, "\n".join(pages), blocks, tuple(starts))


_READERS: dict[str, Callable[[Path, Callable[[str], None]], Extracted]] = {
    ".md": _read_markdown,
    ".markdown": _read_markdown,
    ".txt": _read_text,
    ".html": _read_html,
    ".htm": _read_html,
    ".pdf": _read_pdf,
    ".docx": _read_docx,
}


# -- Splitting to size -------------------------------------------------------------------


def _words(text: str) -> int:
    return len(text.split())


@cache
def _sentencizer() -> Any:
    """spaCy's rule-based sentence ends (no model to load)."""
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


def even_pieces(text: str, chunk_words: int) -> list[str]:
    """`text` whole when it is at most `WHOLE_SECTION` times `chunk_words` words, else cut
    at sentence ends into `ceil(words / chunk_words)` pieces of about even size (a
    500-word section at 120: five of about 100 words, not four of 120 and a runt of 20):
    a cut fact costs answers, a runt piece is read without its context. Each piece is a
    slice of `text`; a longer sentence stays whole."""
    total = _words(text)
    if total <= WHOLE_SECTION * chunk_words:
        return [text]
    sentences = list(_sentencizer()(text).sents)
    starts = [word.start() for word in re.finditer(r"\S+", text)]
    ends = [bisect.bisect_left(starts, s.end_char) for s in sentences]  # words up to each end
    pieces = math.ceil(total / chunk_words)
    cuts: list[int] = []  # the sentences that end a piece, each after the one before
    for k in range(1, pieces):
        goal = k * total / pieces
        near = bisect.bisect_left(ends, goal)
        first = cuts[-1] + 1 if cuts else 0
        options = [i for i in (near - 1, near) if first <= i < len(sentences) - 1]
        if options:
            cuts.append(min(options, key=lambda i: abs(ends[i] - goal)))
    bounds = [0, *(sentences[i + 1].start_char for i in cuts), len(text)]
    return [text[start:end].strip() for start, end in pairwise(bounds)]


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _joined(paragraphs: list[Block], chunk_words: int) -> list[Block]:
    """Paragraphs in a row joined while together within `chunk_words` words."""
    out: list[Block] = []
    for block in paragraphs:
        if out and _words(out[-1].text) + _words(block.text) <= chunk_words:
            out[-1] = Block(block.section, f"{out[-1].text}\n\n{block.text}")
        else:
            out.append(block)
    return out


class _Locator:
    """Where a document's passages lie in its text, in order, with one scan: the text's
    words joined by single spaces (as passages are), each mapped to its offset."""

    def __init__(self, text: str) -> None:
        words = list(re.finditer(r"\S+", text))
        self._joined = " ".join(w.group() for w in words)
        self._origin = [w.start() for w in words]
        self._starts = list(accumulate((len(w.group()) + 1 for w in words[:-1]), initial=0))
        self._cursor = 0

    def _offset(self, at: int) -> int:
        word = bisect.bisect_right(self._starts, at) - 1
        return self._origin[word] + at - self._starts[word]

    def locate(self, piece: str) -> tuple[int, int]:
        """Character offsets of `piece` in the text, after the previous one. Where the
        reader changed it (an HTML escape), from its first word to its last."""
        start = self._joined.find(piece, self._cursor)
        end = start + len(piece)
        if start < 0:
            first, last = piece.split()[0], piece.split()[-1]
            start = self._joined.find(first, self._cursor)
            if start < 0:
                at = self._offset(self._cursor) if self._origin else 0
                return at, at
            end = self._joined.find(last, start)
            end = end + len(last) if end >= 0 else start + len(first)
        self._cursor = end
        return self._offset(start), self._offset(end - 1) + 1


def chunk_document(
    path: Path,
    file: str,
    *,
    chunk_words: int,
    max_bytes: int,
    warn: Callable[[str], None],
) -> list[Chunk]:
    """One document's passages, or `DocumentSkipped` with the reason."""
    reader = _READERS.get(path.suffix.lower())
    if reader is None:
        raise DocumentSkipped(f"{path.suffix or 'no suffix'}: not a format hoprag reads")
    size = path.stat().st_size
    if size == 0:
        raise DocumentSkipped("empty file")
    if size > max_bytes:
        raise DocumentSkipped(
            f"{size / 2**20:.1f} MB, over the {max_bytes / 2**20:.0f} MB limit "
            "(HOPRAG_MAX_DOCUMENT_MB)"
        )
    extracted = reader(path, warn)
    blocks = _joined(extracted.blocks, chunk_words) if extracted.paragraphs else extracted.blocks
    locator = _Locator(extracted.text)
    chunks = []
    for block in blocks:
        text = _normalise(block.text)
        if not text:
            continue
        title = block.section[-1] if block.section else extracted.title or path.stem
        for piece in even_pieces(text, chunk_words):
            start, end = locator.locate(piece)
            source = Source(file, block.section, extracted.page_at(start), start, end)
            chunks.append(Chunk(title, piece, source))
    if not chunks:
        raise DocumentSkipped("no text")
    return chunks


def documents_in(folder: Path) -> list[Path]:
    """The documents of a folder that hoprag reads, in sorted path order."""
    try:
        return sorted(
            f for f in folder.rglob("*") if f.suffix.lower() in DOCUMENT_SUFFIXES and f.is_file()
        )
    except PermissionError:
        raise UserError(f"folder {folder} cannot be read (permission denied)") from None


def chunk_documents(
    files: list[Path],
    root: Path,
    *,
    chunk_words: int,
    max_bytes: int,
    warn: Callable[[str], None],
) -> Iterator[Chunk]:
    """Every document's passages, one document read at a time; a document that cannot be
    read is one warning line and is skipped."""
    for path in files:
        name = str(path.relative_to(root)) if path != root else path.name
        try:
            yield from chunk_document(
                path, name, chunk_words=chunk_words, max_bytes=max_bytes, warn=warn
            )
        except DocumentSkipped as exc:
            warn(f"{name}: skipped, {exc}")
        except PermissionError:
            warn(f"{name}: skipped, permission denied")
