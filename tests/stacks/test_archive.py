"""Source archives are deterministic: same tree, same digest and bytes; one byte changed, new digest."""

from __future__ import annotations

import os
import zipfile

from stacks.constructs.archive import build_archive, content_digest


def make_tree(root):
    """A job folder and a library folder, as a job's archive combines them."""
    (root / "job").mkdir(parents=True)
    (root / "job" / "main.py").write_text("def handle(request):\n    return 'ok'\n")
    (root / "job" / "requirements.txt").write_text("functions-framework==3.10.2\n")
    (root / "lib" / "sub").mkdir(parents=True)
    (root / "lib" / "__init__.py").write_text("")
    (root / "lib" / "sub" / "core.py").write_text("VALUE = 1\n")
    return {"": root / "job", "runonce": root / "lib"}


def test_same_tree_gives_same_digest_and_same_bytes(tmp_path):
    first, second = make_tree(tmp_path / "a"), make_tree(tmp_path / "b")
    os.utime(second[""] / "main.py", (0, 0))  # timestamps and locations must not matter
    one = build_archive(first, tmp_path / "out1")
    two = build_archive(second, tmp_path / "out2")
    assert one.digest == two.digest
    assert one.path.read_bytes() == two.path.read_bytes()


def test_one_changed_byte_gives_a_new_digest(tmp_path):
    tree = make_tree(tmp_path)
    before = content_digest(tree)
    (tree["runonce"] / "sub" / "core.py").write_text("VALUE = 2\n")
    assert content_digest(tree) != before


def test_a_renamed_file_gives_a_new_digest(tmp_path):
    tree = make_tree(tmp_path)
    before = content_digest(tree)
    (tree["runonce"] / "sub" / "core.py").rename(tree["runonce"] / "sub" / "other.py")
    assert content_digest(tree) != before


def test_caches_and_hidden_files_are_left_out(tmp_path):
    tree = make_tree(tmp_path)
    before = content_digest(tree)
    (tree[""] / "__pycache__").mkdir()
    (tree[""] / "__pycache__" / "main.cpython-311.pyc").write_bytes(b"\0")
    (tree[""] / ".env").write_text("SECRET=1\n")
    assert content_digest(tree) == before


def test_archive_layout_puts_the_job_at_the_root_and_the_library_beside_it(tmp_path):
    archive = build_archive(make_tree(tmp_path), tmp_path / "out")
    with zipfile.ZipFile(archive.path) as opened:
        assert opened.namelist() == [
            "main.py",
            "requirements.txt",
            "runonce/__init__.py",
            "runonce/sub/core.py",
        ]
        assert {info.date_time for info in opened.infolist()} == {(1980, 1, 1, 0, 0, 0)}
    assert archive.path.name == f"{archive.digest}.zip"
