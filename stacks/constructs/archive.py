"""Deterministic source archives: the same files always give the same zip and the same name.

The object name of a function's source is the digest of its files (paths and bytes, not the
zip's bytes, so the name does not depend on the zlib version). A code change gives a new name
and so a redeploy; an unchanged tree gives the same name and no diff.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# Fixed metadata for every entry: zip timestamps cannot be before 1980.
EPOCH = (1980, 1, 1, 0, 0, 0)
FILE_MODE = 0o644 << 16
SKIPPED_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", "node_modules"}
SKIPPED_SUFFIXES = {".pyc", ".pyo"}


@dataclass(frozen=True)
class Archive:
    """A built source archive."""

    path: Path
    """The zip file on disk."""
    digest: str
    """sha256 (hex) of the archived paths and contents."""


def _members(folders: Mapping[str, Path], overlay: Path | None = None) -> list[tuple[str, Path]]:
    """(name in the archive, file on disk) for every file kept, sorted by name; the files of
    `overlay` go at the root and replace the folders' files of the same name."""
    members = {}
    for prefix, folder in [*folders.items(), *([("", overlay)] if overlay is not None else [])]:
        for path in folder.rglob("*"):
            relative = path.relative_to(folder)
            if not path.is_file() or path.suffix in SKIPPED_SUFFIXES:
                continue
            if any(part in SKIPPED_DIRS or part.startswith(".") for part in relative.parts):
                continue
            members["/".join(filter(None, (prefix, relative.as_posix())))] = path
    return sorted(members.items())


def content_digest(folders: Mapping[str, Path], overlay: Path | None = None) -> str:
    """sha256 over each kept file's archive name and bytes."""
    digest = hashlib.sha256()
    for name, path in _members(folders, overlay):
        data = path.read_bytes()
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def build_archive(folders: Mapping[str, Path], out_dir: Path, overlay: Path | None = None) -> Archive:
    """Zip the folders (archive prefix -> folder; "" is the root) into out_dir/<digest>.zip, with
    the files of `overlay` at the root in place of theirs (`with_requirements`).

    An archive already built for the same digest is reused.
    """
    digest = content_digest(folders, overlay)
    path = out_dir / f"{digest}.zip"
    if not path.exists():
        out_dir.mkdir(parents=True, exist_ok=True)
        partial = out_dir / f"{digest}.{os.getpid()}.partial"  # concurrent synths never share it
        with zipfile.ZipFile(partial, "w") as archive:
            for name, source in _members(folders, overlay):
                info = zipfile.ZipInfo(name, date_time=EPOCH)
                info.external_attr = FILE_MODE
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, source.read_bytes(), compresslevel=9)
        partial.replace(path)
    return Archive(path=path, digest=digest)


def with_requirements(folder: Path, extra: Sequence[str], out_dir: Path) -> Path | None:
    """An overlay holding `folder`'s requirements.txt with the `extra` lines after its own, or
    None without any: a team on Valkey deploys the same function folder as one on Firestore, and
    its archive brings the `valkey` client the store needs (`runonce.store.valkey`). The overlay's
    folder is named by its content, so concurrent synths that write it write the same bytes."""
    if not extra:
        return None
    text = (folder / "requirements.txt").read_text()
    text = text if text.endswith("\n") or not text else text + "\n"
    text += "".join(f"{line}\n" for line in extra)
    overlays = out_dir / "overlays"
    overlay = overlays / hashlib.sha256(text.encode()).hexdigest()[:16]
    if not (overlay / "requirements.txt").is_file():
        overlay.mkdir(parents=True, exist_ok=True)
        partial = overlays / f"{overlay.name}.{os.getpid()}.partial"  # outside the overlay it fills
        partial.write_text(text)
        partial.replace(overlay / "requirements.txt")
    return overlay
