"""The README's shape, and every relative link of the README and docs/ (every folder of it) resolving
to a file and heading that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
DOCS = sorted([README, *(ROOT / "docs").rglob("*.md")])

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def prose(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def without_code(line: str) -> str:
    """A line with its inline code spans taken out."""
    return re.sub(r"`[^`]*`", "", line)


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown file: lower case, punctuation but `-`
    and `_` dropped, spaces made `-`, a repeated one suffixed -1, -2, ..."""
    seen: dict[str, int] = {}
    for line in prose(path.read_text()):
        heading = re.match(r"#{1,6} (.*)", line)
        if heading is None:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading[1].strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        if count:
            seen[f"{slug}-{count}"] = 1
    return set(seen)


def links(path: Path) -> list[str]:
    """The relative link targets in a Markdown file's prose (inline code left out)."""
    found = []
    for line in prose(path.read_text()):
        found += links_in(line)
    return [target for target in found if not _EXTERNAL.match(target)]


def test_the_readme_is_at_most_200_lines():
    assert len(README.read_text().splitlines()) <= 200


def test_the_readme_first_screen_has_the_two_commands_that_work_on_a_fresh_machine():
    first_screen = "\n".join(README.read_text().splitlines()[:40])
    assert "make demo" in first_screen
    assert "make test" in first_screen


@pytest.mark.parametrize("path", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_of_the_readme_and_docs_resolves_with_its_anchor(path):
    broken = []
    for target in links(path):
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.relative_to(ROOT)}")
    assert not broken, f"{path.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_link_check_sees_the_links_it_checks():
    assert "docs/library.md#the-guarantee" in links(README)
    assert {ROOT / "docs" / "schedules" / "overlap.md", ROOT / "docs" / "stacks" / "config.md"} <= set(DOCS)
    assert "what-pubsub-push-is-answered" in anchors(ROOT / "docs" / "library.md")


SCHEDULES = ROOT / "docs" / "schedules"
CHAPTER = ["README.md", "overlap.md", "backfill.md", "previous.md", "pause.md", "calendars.md"]
"""The schedules chapter in the order a job meets its features (docs/schedules/README.md)."""


def next_page(path: Path) -> Path:
    """The page a chapter page's closing `Next: [...](page.md)` paragraph links first."""
    text = path.read_text()
    assert "\n\nNext: " in text, f"{path.relative_to(ROOT)} has no closing 'Next:' paragraph"
    first = links_in(text.rsplit("\n\nNext: ", 1)[1])[0]
    return (path.parent / first.partition("#")[0]).resolve()


def links_in(text: str) -> list[str]:
    """The link targets in a piece of Markdown prose."""
    return _LINK.findall(without_code(text))


def test_the_schedules_chapter_reads_front_to_back_through_its_next_links():
    order, page = [], SCHEDULES / "README.md"
    while page.parent == SCHEDULES and page not in order:
        order.append(page)
        page = next_page(page)
    assert [path.name for path in order] == CHAPTER
    assert set(order) == set(SCHEDULES.glob("*.md")), "a page of docs/schedules/ is not in the chapter"


def test_the_schedules_opening_links_every_page_of_the_chapter():
    linked = {target.partition("#")[0] for target in links(SCHEDULES / "README.md")}
    assert set(CHAPTER[1:]) <= linked


@pytest.mark.parametrize("name", CHAPTER[1:])
def test_each_schedules_page_says_how_to_set_it_what_it_guarantees_and_its_limits(name):
    headings = anchors(SCHEDULES / name)
    assert any(heading.startswith("setting-it") for heading in headings), f"{name}: no 'Setting it'"
    assert {"what-it-guarantees", "limits"} <= headings, f"{name}: {sorted(headings)}"


def _pinned() -> set[str]:
    """The direct dependencies: requirements.in, and checkov from its own lock."""
    names = {
        line.split("==")[0].strip().lower()
        for line in (ROOT / "requirements.in").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    return names | {"checkov"}


def test_the_readme_libraries_section_names_every_pinned_library():
    text = README.read_text()
    libraries = text.split("## Libraries, and why", 1)[1].split("\n## ", 1)[0]
    named = {name.lower() for name in re.findall(r"\*\*([\w.-]+)\*\*", libraries)}
    assert _pinned() <= named, f"not named in the README's Libraries, and why: {_pinned() - named}"


# Words that tell how the code came to be rather than what it does.
_HISTORY = re.compile(r"\b(the seed|used to|no longer|predates|previously|anymore|now)\b", re.IGNORECASE)


@pytest.mark.parametrize("name", ["README.md", "docs/library.md", "docs/benchmarks.md"])
def test_the_readme_and_the_library_docs_say_what_is_not_how_it_came_to_be(name):
    told = [line for line in prose((ROOT / name).read_text()) if _HISTORY.search(without_code(line))]
    assert not told, f"{name}: " + " | ".join(told)
