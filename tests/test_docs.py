"""README.md and docs/: the README stays a short front page, and every link between the pages
(and CHANGELOG.md's) lands on a file and a heading that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings (outside code blocks)."""
    found, fence = set(), False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and (heading := re.match(r"#{1,6} (.*)", line)):
            text = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower())
            found.add(text.replace(" ", "-"))
    return found


def _links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def test_the_readme_is_a_front_page_of_at_most_8_kb() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 8 * 1024
    top = readme.split("\n## ", 1)[0].splitlines()  # before the first section
    assert [line.split()[:2] for line in top if line.startswith("make ")] == [
        ["make", "demo"], ["make", "test"]]
    linked = {t.split("#")[0] for t in _links(ROOT / "README.md")}
    assert {f"docs/{p.name}" for p in PAGES[1:]} <= linked  # every page is reachable


def test_every_relative_link_lands_on_a_file_and_a_heading() -> None:
    broken = []
    for page in [*PAGES, ROOT / "CHANGELOG.md"]:
        for target in _links(page):
            path, _, anchor = target.partition("#")
            where = (page.parent / path).resolve() if path else page
            if not where.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and where.suffix == ".md" and anchor not in _anchors(where):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []
