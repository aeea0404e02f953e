"""Docs a user reads in minutes (issue 52.6): every user page in docs/ is at most 15,000 bytes, and every relative
markdown link in README.md and docs/ (notes included) reaches an existing file and, where it names one, a heading.

The method and history of measurements live in docs/notes/ (exempt from the size limit: lab notes, linked from
the page they back). Anchors are computed as GitHub does: lowercase, punctuation but ``-`` and ``_`` dropped,
spaces to ``-``, a repeated heading suffixed ``-1``, ``-2``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
LIMIT = 15_000
"""Bytes a user page may hold: a page read in minutes."""

PENDING: dict[str, str] = {}
"""Pages still over the limit, with why; a page leaves this list when it is split."""

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def anchors(page: Path) -> set[str]:
    """The GitHub anchors of ``page``'s headings."""
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", page.read_text()).splitlines():
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """``page:line target`` for each relative link of ``page`` whose file or anchor does not exist."""
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), page.read_text())
    bad = []
    for number, line in enumerate(text.splitlines(), 1):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists() or (anchor and file.suffix == ".md" and anchor not in anchors(file)):
                bad.append(f"{page.relative_to(root)}:{number} {target}")
    return bad


def test_user_pages_are_short() -> None:
    over = {p.name: p.stat().st_size for p in DOCS.glob("*.md") if p.stat().st_size > LIMIT}
    assert set(over) - set(PENDING) == set(), f"docs pages over {LIMIT:,} bytes (move history to docs/notes/): {over}"
    assert all((DOCS / name).is_file() for name in PENDING)


def test_relative_links_resolve() -> None:
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    bad = [entry for page in pages for entry in broken_links(page)]
    assert bad == [], "broken links:\n" + "\n".join(bad)


def test_the_checker_sees_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A `title` (x)\n\n[ok](#a-title-x) [gone](missing.md) [no anchor](#nope)\n")
    assert broken_links(page, tmp_path) == ["page.md:3 missing.md", "page.md:3 #nope"]
