"""The grader's intake: every submission in the inputs (notebooks, folders, zips) as an Entry, links not followed.

A folder is walked without following symbolic links (a link is an error entry, never read), a zip's
members are unpacked into the run's staging folder (an LMS's folder per student keeps the students
apart), and an input with nothing in it still becomes an entry, so its student does not vanish.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

__all__ = ["MAX_NOTEBOOK_BYTES", "Entry", "collect", "read"]

MAX_NOTEBOOK_BYTES = 32 << 20


@dataclass(frozen=True)
class Entry:
    """One submission found in the inputs: the file to read (None if there is none), its name, its label."""

    path: Path | None
    name: str  # the path it was submitted under, in its folder or zip: the student and exercise are read from it
    label: str  # what the report calls it: a path, or zip:member
    error: str = ""  # why there is nothing to grade


def collect(inputs: list[Path], staging: Path) -> list[Entry]:
    """Every notebook, folder member and zip member of ``inputs`` as an Entry; zip members unpack into ``staging``.

    Folders are walked without following symbolic links: a link becomes an error entry, never read.
    A zip with nothing in it becomes an error entry, so its student does not vanish.
    """
    found: list[Entry] = []
    for n, item in enumerate(inputs):
        if item.is_dir():
            found += _walk(item)
        elif item.suffix.lower() == ".zip" and zipfile.is_zipfile(item):
            found += _unzip(item, staging / f"{n:03d}")
        elif item.exists():
            found.append(Entry(item.resolve(), item.name, str(item)))
        else:
            raise ValueError(f"submissions: {item} does not exist")
    return found


def _walk(folder: Path) -> list[Entry]:
    out = []
    for here, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files) + [d for d in dirs if (Path(here) / d).is_symlink()]:
            path = Path(here) / name
            if name.startswith("."):
                continue
            known_as = path.relative_to(folder).as_posix()  # a folder per student keeps the students apart
            if path.is_symlink():
                out.append(Entry(None, known_as, str(path), "a symbolic link: not followed"))
            elif path.is_file():
                out.append(Entry(path, known_as, str(path)))
            else:  # a pipe, a socket, a device: opening it could block or worse
                out.append(Entry(None, known_as, str(path), "not a regular file"))
    return out


def _unzip(archive: Path, staging: Path) -> list[Entry]:
    out = []
    try:
        with zipfile.ZipFile(archive) as z:
            for i, info in enumerate(z.infolist()):
                name = info.filename  # the member's path: an LMS's folder per student keeps the students apart
                base = PurePosixPath(name).name
                if info.is_dir() or not base or base.startswith(".") or "__MACOSX" in PurePosixPath(name).parts:
                    continue
                label = f"{archive}:{info.filename}"
                if info.file_size > MAX_NOTEBOOK_BYTES:
                    out.append(Entry(None, name, label, f"larger than {MAX_NOTEBOOK_BYTES >> 20} MB"))
                    continue
                try:
                    data = z.read(info)
                except Exception as err:  # encrypted, corrupt, unsupported compression
                    out.append(Entry(None, name, label, f"cannot be unpacked: {err}"[:300]))
                    continue
                target = staging / f"{i:05d}" / "member"
                target.parent.mkdir(parents=True)
                target.write_bytes(data)
                out.append(Entry(target, name, label))
    except (zipfile.BadZipFile, OSError) as err:
        return [Entry(None, archive.name, str(archive), f"a zip that cannot be read: {err}"[:300])]
    return out or [Entry(None, archive.name, str(archive), "the zip holds no files")]


def read(path: Path) -> bytes:
    """The file's bytes, without following a symbolic link, at most MAX_NOTEBOOK_BYTES."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    with open(fd, "rb") as f:
        data = f.read(MAX_NOTEBOOK_BYTES + 1)
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"larger than {MAX_NOTEBOOK_BYTES >> 20} MB")
    return data
