"""Documents into passages (app/index/documents.py): PDF, HTML, Word, Markdown and text,
split by their structure then by size, titled by document and section, each passage with
its source; and every kind of bad document skipped with one line naming it."""

from __future__ import annotations

import json
from pathlib import Path

import docx
import pytest
from fpdf import FPDF

from app.errors import UserError
from app.index.corpus import load_corpus
from app.index.documents import SECTION_SEP, WHOLE_SECTION, even_pieces
from app.settings import Settings
from tests.conftest import DEMO_QUESTION, SAMPLE_CORPUS, run_cli

SECTIONS = {
    "Tavistrom College": "Tavistrom College is a small college in the town of Brisk Hollow. "
    "It was founded by Augustin Reyvald in 1862.",
    "Brisk Hollow": "Brisk Hollow is a market town in the eastern hills. The Ulden River "
    "flows through Brisk Hollow.",
    "Dunmere College": "Dunmere College is a college in the town of Wexley Ford. The Brask "
    "River flows through Wexley Ford.",
}


def _load(path: Path, **settings: object) -> tuple[list, list[str]]:
    warnings: list[str] = []
    passages = load_corpus(path, Settings(**settings), warn=warnings.append)
    return passages, warnings


def _pdf(path: Path, pages: list[list[str]], *, password: str = "", bookmarks: bool = True) -> Path:
    """A PDF with a text layer, one heading per section (bookmarked unless not)."""
    pdf = FPDF()
    pdf.set_title("Regional handbook")
    for page in pages:
        pdf.add_page()
        for heading in page:
            if bookmarks:
                pdf.start_section(heading)
            pdf.set_font("helvetica", "B", 14)
            pdf.multi_cell(0, 8, heading, new_x="LMARGIN", new_y="NEXT")
            pdf.set_font("helvetica", "", 11)
            pdf.multi_cell(0, 6, SECTIONS[heading], new_x="LMARGIN", new_y="NEXT")
    if password:
        pdf.set_encryption(owner_password="owner", user_password=password)
    pdf.output(str(path))
    return path


def test_a_two_page_pdf_gives_sections_titled_and_paged(tmp_path: Path) -> None:
    _pdf(tmp_path / "handbook.pdf", [["Tavistrom College", "Brisk Hollow"], ["Dunmere College"]])
    passages, warnings = _load(tmp_path / "handbook.pdf")
    assert warnings == []
    assert [p.title for p in passages] == list(SECTIONS)  # each its own heading
    assert [p.source.page for p in passages] == [1, 1, 2]
    assert "Ulden River" in passages[1].text and "Brisk Hollow" not in passages[0].title
    assert passages[2].source.cite() == f"handbook.pdf{SECTION_SEP}Dunmere College, p. 2"


def test_a_pdf_section_runs_on_across_pages_and_cites_the_page_it_starts_on(
    tmp_path: Path,
) -> None:
    """A page break inside a sentence does not cut it: the section's text flows on, is
    cut only at sentence ends, and each passage cites the page it starts on."""
    sentences = [
        f"The Ulden River fed mill number {n} of Brisk Hollow in its year {n}." for n in range(90)
    ]
    pdf = FPDF()
    pdf.add_page()
    pdf.start_section("Brisk Hollow")
    pdf.set_font("helvetica", "", 11)
    pdf.multi_cell(0, 8, "Brisk Hollow", new_x="LMARGIN", new_y="NEXT")
    pdf.multi_cell(0, 6, " ".join(sentences), new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(tmp_path / "mills.pdf"))
    passages, _ = _load(tmp_path / "mills.pdf", chunk_words=60)
    assert " ".join(p.text for p in passages) == " ".join(sentences)
    assert all(p.text.endswith(".") for p in passages)  # every passage ends a sentence
    pages = [p.source.page for p in passages]
    assert pages[0] == 1 and pages[-1] == 2 and pages == sorted(pages)
    assert {p.source.section for p in passages} == {("Brisk Hollow",)}


def test_a_heading_pushed_to_the_next_page_still_opens_its_section(tmp_path: Path) -> None:
    """A bookmark set at the foot of a page whose heading the layout moved to the next
    page (as fpdf2 and word processors do) still opens its section there."""
    pdf = FPDF()
    pdf.set_font("helvetica", "", 11)
    pdf.add_page()
    pdf.start_section("Tavistrom College")
    pdf.multi_cell(0, 6, "Tavistrom College", new_x="LMARGIN", new_y="NEXT")
    pdf.multi_cell(0, 6, SECTIONS["Tavistrom College"], new_x="LMARGIN", new_y="NEXT")
    pdf.set_y(pdf.h - pdf.b_margin - 2)  # the foot of page 1
    pdf.start_section("Brisk Hollow")
    pdf.multi_cell(0, 6, "Brisk Hollow", new_x="LMARGIN", new_y="NEXT")
    pdf.multi_cell(0, 6, SECTIONS["Brisk Hollow"], new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(tmp_path / "handbook.pdf"))
    passages, _ = _load(tmp_path / "handbook.pdf")
    assert [(p.title, p.source.page) for p in passages] == [
        ("Tavistrom College", 1),
        ("Brisk Hollow", 2),
    ]


def test_an_html_page_keeps_its_main_text_and_headings(tmp_path: Path) -> None:
    body = "".join(f"<h2>{h}</h2><p>{t}</p>" for h, t in SECTIONS.items())
    (tmp_path / "page.html").write_text(
        "<html><head><title>Regional handbook</title></head><body>"
        "<nav><a href='/'>Home</a> | <a href='/about'>About us</a></nav>"
        f"<main><h1>Regional handbook</h1>{body}</main>"
        "<footer>Copyright 2026 Handbook Press, all rights reserved</footer></body></html>"
    )
    passages, _ = _load(tmp_path / "page.html")
    assert [p.title for p in passages] == list(SECTIONS)
    text = " ".join(p.text for p in passages)
    assert "Copyright" not in text and "About us" not in text


def test_an_html_page_reads_as_the_page_shows_it(tmp_path: Path) -> None:
    """Characters Markdown would take for formatting come through as the page shows
    them, not with the backslashes of trafilatura's Markdown."""
    (tmp_path / "page.html").write_text(
        "<html><body><main><h2>Tariffs_2024 [draft]</h2><p>Dial +247 &lt;then&gt; the "
        "number; file_name *not* bold, #1 in the list.</p></main></body></html>"
    )
    [passage], _ = _load(tmp_path / "page.html")
    assert passage.title == "Tariffs_2024 [draft]"
    assert passage.text == "Dial +247 <then> the number; file_name *not* bold, #1 in the list."


def test_a_word_document_is_split_by_its_heading_styles(tmp_path: Path) -> None:
    document = docx.Document()
    document.add_heading("Regional handbook", 0)  # the Title style
    document.add_heading("Colleges", 1)
    for name in ("Tavistrom College", "Dunmere College"):
        document.add_heading(name, 2)
        document.add_paragraph(SECTIONS[name])
    document.add_heading("Brisk Hollow", 1)
    document.add_paragraph(SECTIONS["Brisk Hollow"])
    document.save(str(tmp_path / "handbook.docx"))
    passages, _ = _load(tmp_path / "handbook.docx")
    assert [p.source.section for p in passages] == [
        ("Colleges", "Tavistrom College"),
        ("Colleges", "Dunmere College"),
        ("Brisk Hollow",),
    ]
    assert [p.title for p in passages] == ["Tavistrom College", "Dunmere College", "Brisk Hollow"]
    assert passages[0].source.cite() == SECTION_SEP.join(
        ["handbook.docx", "Colleges", "Tavistrom College"]
    )


def _long_markdown(sections: int = 12, sentences: int = 30) -> str:
    parts = ["# Atlas of invented towns\n"]
    for s in range(sections):
        lines = [
            f"Town {s} has a sentence numbered {n} about its river and its market."
            for n in range(sentences)
        ]
        parts.append(f"## Town {s}\n\n" + " ".join(lines) + "\n")
    return "\n".join(parts)


def test_a_long_markdown_file_is_cut_at_sentences_into_even_pieces(tmp_path: Path) -> None:
    """A 390-word section at a 60-word target: seven pieces of whole sentences that differ
    by at most one sentence (13 words), not six of 60 and a runt of 30."""
    text = _long_markdown()
    (tmp_path / "atlas.md").write_text(text)
    passages, _ = _load(tmp_path / "atlas.md", chunk_words=60)
    assert len(passages) == 12 * 7
    for section in range(12):
        sizes = [len(p.text.split()) for p in passages if p.title == f"Town {section}"]
        assert len(sizes) == 7 and sum(sizes) == 390 and max(sizes) - min(sizes) <= 13
    for p in passages:
        assert p.text.endswith(".")  # whole sentences
        section = p.source.section[0]
        assert p.title == section
        assert p.text.startswith(section)  # no passage crosses a heading
        assert " ".join(text[p.source.start : p.source.end].split()) == p.text  # offsets


def test_a_section_up_to_twice_the_target_is_one_passage(tmp_path: Path) -> None:
    (tmp_path / "atlas.md").write_text(_long_markdown(sections=2, sentences=9))  # 117 words
    passages, _ = _load(tmp_path / "atlas.md", chunk_words=60)
    assert [len(p.text.split()) for p in passages] == [117, 117]


def test_sections_under_the_same_heading_stay_apart(tmp_path: Path) -> None:
    """Two sections in a row under one heading are two passages (a header splitter that
    groups lines by heading path joins them); a `#` line in a code block is no heading."""
    (tmp_path / "notes.md").write_text(
        "## Brisk Hollow\n\nThe Ulden River flows through it.\n\n"
        "## Brisk Hollow\n\nIts market opens on Fridays.\n\n```\n# not a heading\n```\n"
    )
    passages, _ = _load(tmp_path / "notes.md")
    assert [p.title for p in passages] == ["Brisk Hollow", "Brisk Hollow"]
    assert passages[0].text == "The Ulden River flows through it."
    assert passages[1].text == "Its market opens on Fridays. ``` # not a heading ```"


def test_a_passage_is_the_documents_own_text(tmp_path: Path) -> None:
    """A sentence end inside a word (`said."Forbes`) cuts there, adding no space."""
    text = " ".join(f'Ulden {n} said."Forbes printed it in year {n}.' for n in range(40))
    (tmp_path / "press.txt").write_text(text)
    passages, _ = _load(tmp_path / "press.txt", chunk_words=60)
    assert len(passages) > 1
    assert all(p.text in text for p in passages)
    assert "".join(text[p.source.start : p.source.end] for p in passages).replace(" ", "") == (
        text.replace(" ", "")
    )


def test_plain_text_is_split_at_paragraphs_joined_to_size(tmp_path: Path) -> None:
    paragraphs = [f"Paragraph {n} tells of the mill of Brisk Hollow." for n in range(12)]
    (tmp_path / "mills.txt").write_text("\n\n".join(paragraphs))  # 9 words each
    passages, _ = _load(tmp_path / "mills.txt", chunk_words=20)
    assert [p.text for p in passages] == [" ".join(paragraphs[n : n + 2]) for n in range(0, 12, 2)]
    assert {p.title for p in passages} == {"mills"}


def test_folders_mix_formats_in_path_order(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "b.md").write_text("# B\nbeta is here.")
    (tmp_path / "a.txt").write_text("alpha is here.")
    (tmp_path / "sub" / "c.txt").write_text("gamma is here.")
    _pdf(tmp_path / "sub" / "d.pdf", [["Brisk Hollow"]])
    passages, warnings = _load(tmp_path)
    assert [(p.title, p.source.file) for p in passages] == [
        ("a", "a.txt"),
        ("B", "b.md"),
        ("c", "sub/c.txt"),
        ("Brisk Hollow", "sub/d.pdf"),
    ]
    assert passages[1].text == "beta is here." and warnings == []
    _pdf(tmp_path / "sub" / "d.pdf", [["Brisk Hollow"]], bookmarks=False)
    assert _load(tmp_path)[0][-1].title == "Regional handbook"  # no heading: the document's


def _scanned_pdf(path: Path) -> None:
    pdf = FPDF()
    pdf.add_page()
    pdf.rect(20, 20, 120, 160, style="F")  # a page that is all picture
    pdf.output(str(path))


BAD = {
    "scan.pdf": (_scanned_pdf, "no text layer"),
    "locked.pdf": (lambda p: _pdf(p, [["Brisk Hollow"]], password="secret"), "encrypted"),
    "broken.pdf": (lambda p: p.write_bytes(b"%PDF-1.7\n1 0 obj <<"), "damaged PDF"),
    "binary.txt": (lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00"), "binary"),
    "empty.md": (lambda p: p.write_text(""), "empty file"),
    "huge.txt": (lambda p: p.write_text("word " * 300_000), "over the 1 MB limit"),
    "broken.docx": (lambda p: p.write_bytes(b"PK not a zip"), "not a readable Word"),
}


def test_bad_documents_are_skipped_with_one_line_each_and_the_rest_indexed(
    tmp_path: Path,
) -> None:
    for name, (make, _) in BAD.items():
        make(tmp_path / name)
    (tmp_path / "good.md").write_text("## Brisk Hollow\n\n" + SECTIONS["Brisk Hollow"])
    (tmp_path / "latin.txt").write_bytes("Caf\xe9 Ulden sits on the river.".encode("cp1252"))
    passages, warnings = _load(tmp_path, max_document_mb=1)
    assert [p.source.file for p in passages] == ["good.md", "latin.txt"]
    assert passages[1].text == "Café Ulden sits on the river."
    for name, (_, why) in BAD.items():
        lines = [w for w in warnings if w.startswith(f"{name}: skipped")]
        assert len(lines) == 1 and why in lines[0], (name, warnings)
    assert any(w.startswith("latin.txt: not UTF-8") for w in warnings)


def test_a_folder_without_documents_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "notes.csv").write_text("a,b\n")
    with pytest.raises(UserError, match="holds no documents"):
        load_corpus(tmp_path)
    (tmp_path / "empty.md").write_text("")
    with pytest.raises(UserError, match="empty"):
        load_corpus(tmp_path, warn=lambda _: None)


@pytest.mark.e2e
@pytest.mark.parametrize("files", [1, 2], ids=["one-long-file", "two-handbooks"])
def test_a_multi_hop_answer_over_markdown_handbooks_cites_their_sections(
    home: Path, tmp_path: Path, files: int
) -> None:
    """The sample's 24 passages as the sections of one long Markdown handbook, or of two
    of about 460 words (the folder of issue 51): `hoprag index` on the folder, then the
    demo question through the CLI, answered and cited by file and section."""
    sample = json.loads(SAMPLE_CORPUS.read_text())
    folder = tmp_path / "handbooks"
    folder.mkdir()
    per_file = len(sample) // files
    for n in range(files):
        sections = sample[n * per_file : (n + 1) * per_file]
        (folder / f"handbook{n + 1}.md").write_text(
            f"# Regional handbook {n + 1}\n\n"
            + "\n\n".join(f"## {p['title']}\n\n{p['text']}" for p in sections)
        )
    town = f"handbook{1 + [p['title'] for p in sample].index('Brisk Hollow') // per_file}.md"
    built = run_cli("index", str(folder), "--name", "handbook", "--quiet", home=home)
    assert built.returncode == 0 and "24 passages" in built.stdout, built.stderr
    asked = run_cli("ask", DEMO_QUESTION, "--index", "handbook", "--show-passages", home=home)
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.splitlines()[0] == "Ulden River"
    cited = next(line for line in asked.stderr.splitlines() if "cited:" in line)
    assert f"{town}{SECTION_SEP}Brisk Hollow" in cited
    assert f"{town}{SECTION_SEP}Brisk Hollow\nBrisk Hollow is a market town" in asked.stdout


@pytest.mark.parametrize("bad", [{"chunk_words": 3}, {"max_document_mb": 0}])
def test_document_settings_out_of_range_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(UserError, match="out of range"):
        Settings(**bad)


def test_a_section_is_whole_up_to_its_bound_and_cut_evenly_past_it() -> None:
    sentence = "The mill on the river ground wheat for the town."  # ten words
    whole = " ".join([sentence] * (WHOLE_SECTION * 12 // 10))
    assert even_pieces(whole, chunk_words=12) == [whole]
    longer = f"{whole} {sentence}"
    pieces = even_pieces(longer, chunk_words=12)
    assert len(pieces) == -(-len(longer.split()) // 12) and " ".join(pieces) == longer
    sizes = [len(p.split()) for p in pieces]
    assert max(sizes) - min(sizes) <= 10  # even: at most a sentence apart
