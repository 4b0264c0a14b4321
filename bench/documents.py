"""`deft` over the benchmark corpora written as documents (issue 51): does splitting
real documents by structure keep the passage-level answers?

    python -m bench.documents --benchmarks 2wikimultihopqa --formats md [--limit 60]
        [--index-only]

Each corpus is written as files of PASSAGES_PER_FILE passages in corpus order (gold and
distractor passages mixed as they come): Markdown and HTML with every passage a section
under its title, PDF with every passage a bookmarked heading and its text (in DejaVu
Sans, which lacks CJK and Indic glyphs: those characters are missing from the PDFs), and
plain text without headings. The folder goes through `hoprag index` as a user's would; a
question's gold passages become the passages cut from the gold passage's text, and `deft`
runs on the first LIMIT dev questions through `hoprag eval` into
bench/results/eval/BENCHMARK-documents-FORMAT (resumable, as bench.run_systems; named apart
from the `BENCHMARK-deft-*` configurations that bench.reachable counts). The per-question
scores stay in results.jsonl; the traces move to traces.jsonl.gz, which git ignores. With
`--index-only` it writes and indexes from scratch (nothing reused from an earlier build),
timing a PDF build into bench/results/documents_index.json (pages per minute).
"""

from __future__ import annotations

import argparse
import html
import json
import logging
import subprocess
import sys
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.index.documents import WHOLE_SECTION
from app.index.store import CorpusIndex
from app.settings import Settings
from bench.common import RESULTS, TUNING_SIZE, load_results, require_data, run_measured, save
from bench.run_systems import HOPRAG

PASSAGES_PER_FILE = 20
FORMATS = ("md", "html", "pdf", "txt")
PDF_FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")  # Debian fonts-dejavu


def _write(fmt: str, path: Path, title: str, passages: list[dict[str, str]]) -> None:
    if fmt == "md":
        body = "\n\n".join(f"## {p['title']}\n\n{p['text']}" for p in passages)
        path.write_text(f"# {title}\n\n{body}\n")
    elif fmt == "txt":
        path.write_text("\n\n".join(p["text"] for p in passages) + "\n")
    elif fmt == "html":
        sections = "".join(
            f"<section><h2>{html.escape(p['title'])}</h2><p>{html.escape(p['text'])}</p></section>"
            for p in passages
        )
        path.write_text(
            f"<!doctype html><html><head><title>{html.escape(title)}</title></head><body>"
            f"<nav><a href='index.html'>Contents</a></nav><main><h1>{html.escape(title)}</h1>"
            f"{sections}</main><footer>{html.escape(title)}</footer></body></html>"
        )
    else:
        write_pdf(path, title, passages)


def write_pdf(
    path: Path, title: str, passages: list[dict[str, str]], figures: Sequence[Any] = ()
) -> None:
    """Every passage a bookmarked heading and its text; a figure (a PIL image) after
    each passage while they last."""
    from fpdf import FPDF  # a dev dependency

    logging.getLogger("fpdf").setLevel(logging.ERROR)  # glyphs DejaVu lacks: CJK, Indic
    pdf = FPDF()
    pdf.set_title(title)
    pdf.add_font("dejavu", "", str(PDF_FONT))
    pdf.add_page()
    for n, p in enumerate(passages):
        pdf.start_section(p["title"])
        pdf.set_font("dejavu", "", 14)  # a book's sizes: about 450 words a page
        pdf.multi_cell(0, 8, p["title"], new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("dejavu", "", 11)
        pdf.multi_cell(0, 6, p["text"], new_x="LMARGIN", new_y="NEXT")
        if n < len(figures):
            pdf.image(figures[n], w=60)
    pdf.output(str(path))


def write_documents(corpus: list[dict[str, str]], fmt: str, folder: Path, bench: str) -> None:
    """The corpus as documents, once (a complete folder is kept)."""
    done = folder / ".complete"
    if done.is_file():
        return
    folder.mkdir(parents=True, exist_ok=True)
    for n, start in enumerate(range(0, len(corpus), PASSAGES_PER_FILE), start=1):
        group = corpus[start : start + PASSAGES_PER_FILE]
        _write(fmt, folder / f"part-{n:04d}.{fmt}", f"{bench} part {n}", group)
    done.write_text("")


def _words(text: str, n: int | None = None) -> str:
    """The first `n` words, without format characters (a reader may drop a
    left-to-right mark), white space collapsed."""
    visible = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return " ".join(visible.split()[:n])


def gold_chunks(corpus: list[dict[str, str]], index: CorpusIndex) -> dict[int, list[int]]:
    """Corpus passage id -> the ids of the indexed passages cut from its text. A file's
    passages follow its corpus passages in order: each opens in the first one from the
    current on that holds its opening and is not yet covered (corpora hold passages twice,
    and sentences in common), and takes the next ones too that it holds whole after it
    (plain text joins short paragraphs). One that opens in none (a PDF reader reorders
    a right-to-left script and drops a script its font lacks) goes to the one sharing
    half its words."""
    by_file: dict[str, list[Any]] = {}
    for record in index.passages(list(range(len(index)))):
        if record.source is not None:
            by_file.setdefault(record.source.file, []).append(record)
    chunks: dict[int, list[int]] = {}
    for file, records in by_file.items():
        first = (int(Path(file).stem.split("-")[1]) - 1) * PASSAGES_PER_FILE
        end = min(first + PASSAGES_PER_FILE, len(corpus))
        texts = {c: _words(corpus[c]["text"]) for c in range(first, end)}
        uncovered = {c: len(text.split()) for c, text in texts.items()}  # words left
        current = first
        for record in records:
            text = _words(record.text)
            head = _words(record.text, 12)
            later = range(current, end)
            opens = next((c for c in later if head in texts[c] and uncovered[c] > 0), None)
            if opens is None:
                words = set(text.split())
                shared = {c: len(words & set(texts[c].split())) for c in later}
                opens = max(shared, key=shared.__getitem__)
                if 2 * shared[opens] < len(words):
                    continue
            owners = [opens]
            cursor = len(texts[opens]) - texts[opens].find(head)  # where its text ends
            while owners[-1] + 1 < end and text.startswith(texts[owners[-1] + 1], cursor + 1):
                owners.append(owners[-1] + 1)
                cursor += 1 + len(texts[owners[-1]])
            uncovered[opens] -= len(text.split())
            uncovered.update(dict.fromkeys(owners[1:], 0))  # joined whole
            for owner in owners:
                chunks.setdefault(owner, []).append(record.id)
            current = owners[-1]
    return chunks


def derived_questions(
    questions: list[dict[str, Any]], chunks: dict[int, list[int]], limit: int
) -> tuple[list[dict[str, Any]], int]:
    """The first `limit` dev questions with gold ids of the document index; and how many
    gold passages no indexed passage came from."""
    dev = [q for q in questions if q.get("split") == "dev"][:limit]
    lost = 0
    out = []
    for q in dev:
        ids: list[int] = []
        for gold in q.get("gold_corpus_idx") or []:
            lost += gold not in chunks
            ids += chunks.get(gold, [])
        out.append({**q, "gold_corpus_idx": ids})
    return out, lost


def _index(folder: Path, name: str, fmt: str, *, fresh: bool) -> None:
    """`hoprag index` on the folder; `fresh`: from scratch (nothing reused), and a PDF
    build timed into bench/results/documents_index.json."""
    if not fresh or fmt != "pdf":
        subprocess.run([HOPRAG, "index", str(folder), "--name", name, "--quiet"], check=True)
        return
    from pypdf import PdfReader

    subprocess.run([HOPRAG, "index", "drop", name, "--yes"], capture_output=True)
    seconds, _, out = run_measured([HOPRAG, "index", str(folder), "--name", name, "--quiet"])
    rows = {r["index"]: r for r in (load_results("documents_index") or {}).get("rows", [])}
    pages = sum(len(PdfReader(str(f)).pages) for f in sorted(folder.glob("*.pdf")))
    rows[name] = {
        "index": name,
        "files": len([f for f in folder.iterdir() if f.suffix == f".{fmt}"]),
        "pages": pages,
        "passages": int(out.split(": ", 1)[1].split()[0]),
        "seconds": round(seconds, 1),
        "pages_per_minute": round(pages / seconds * 60),
    }
    command = "python -m bench.documents " + " ".join(sys.argv[1:])
    save("documents_index", {"command": command, "rows": list(rows.values())})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", nargs="+", default=["2wikimultihopqa"])
    parser.add_argument("--formats", nargs="+", default=["md"], choices=FORMATS)
    parser.add_argument("--limit", type=int, default=TUNING_SIZE)
    parser.add_argument("--index-only", action="store_true", help="write and index, no eval")
    args = parser.parse_args()
    data = require_data(args.benchmarks)
    settings = Settings()
    root = settings.home / "bench" / "documents"
    for bench in args.benchmarks:
        corpus = json.loads((data / bench / "corpus.json").read_text())
        questions = json.loads((data / bench / "questions.json").read_text())
        for fmt in args.formats:
            name = f"{bench}-{fmt}"
            folder = root / bench / fmt
            write_documents(corpus, fmt, folder, bench)
            _index(folder, name, fmt, fresh=args.index_only)
            if args.index_only:
                continue
            index = CorpusIndex.open(settings, name)
            derived, lost = derived_questions(questions, gold_chunks(corpus, index), args.limit)
            passages = len(index)
            index.close()
            questions_file = root / bench / f"{fmt}-questions.json"
            questions_file.write_text(json.dumps(derived))
            print(f"== {name}: {lost} gold passages not found among the indexed", flush=True)
            out = RESULTS / "eval" / f"{bench}-documents-{fmt}"
            if not (out / "results.jsonl").is_file():
                subprocess.run([HOPRAG, "cache", "clear", "--index", name, "--yes"], check=True)
            command = [HOPRAG, "eval", "--data", str(questions_file), "--index", name]
            command += ["--split", "dev", "--limit", str(args.limit), "--system", "deft"]
            subprocess.run([*command, "--out", str(out), "--quiet"], check=True)
            _record_splitting(out, passages, settings.chunk_words)


def _record_splitting(run: Path, passages: int, chunk_words: int) -> None:
    """How the run's documents were split, in its run.json: runs from before even pieces
    (cut at every `chunk_words`) have no such entry."""
    meta = json.loads((run / "run.json").read_text())
    meta["documents"] = {
        "passages": passages,
        "splitting": f"sections up to {WHOLE_SECTION * chunk_words} words whole, "
        f"longer ones in even pieces of about {chunk_words}",
    }
    (run / "run.json").write_text(json.dumps(meta, indent=2) + "\n")


if __name__ == "__main__":
    main()
