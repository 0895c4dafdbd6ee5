"""The library's one version: written in runonce/_version.py alone, and the newest release of
CHANGELOG.md (Keep a Changelog's shape), so a release cannot change one without the other. That the
wheel's metadata and the records carry this same number, tests/package/test_wheel.py proves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import runonce

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "functions" / "runonce"
CHANGELOG = ROOT / "CHANGELOG.md"
RELEASE = re.compile(r"## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})")
KINDS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
"""Keep a Changelog 1.1.0's types of changes."""

pytestmark = pytest.mark.fast


def headings(level: str) -> list[str]:
    """The changelog's headings of `level` ("##", "###"), in order, without the hashes."""
    lines = CHANGELOG.read_text().splitlines()
    return [line[len(level) + 1 :] for line in lines if line.startswith(level + " ")]


def test_the_version_is_written_in_runonce_version_alone():
    quoted = re.compile(r"""["']""" + re.escape(runonce.__version__) + r"""["']""")
    elsewhere = [
        str(path.relative_to(ROOT))
        for path in sorted(LIBRARY.rglob("*.py"))
        if path.name != "_version.py" and quoted.search(path.read_text())
    ]
    assert elsewhere == []
    assert quoted.search((LIBRARY / "_version.py").read_text())


def test_the_changelogs_newest_release_is_the_librarys_version_under_unreleased():
    releases = headings("##")
    assert releases[0] == "[Unreleased]"
    newest = RELEASE.fullmatch("## " + releases[1])
    assert newest, f"CHANGELOG.md: after [Unreleased] comes {releases[1]!r}, not '[X.Y.Z] - YYYY-MM-DD'"
    assert newest[1] == runonce.__version__


def test_the_changelogs_releases_are_newest_first_each_once():
    versions = [RELEASE.fullmatch("## " + heading) for heading in headings("##")[1:]]
    assert all(versions), headings("##")
    numbers = [tuple(int(part) for part in match[1].split(".")) for match in versions if match]
    assert numbers == sorted(set(numbers), reverse=True)
    assert "0.16.0" in {match[1] for match in versions if match}


def test_the_changelog_sorts_changes_into_keep_a_changelogs_types():
    assert set(headings("###")) <= KINDS
