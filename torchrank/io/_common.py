"""Shared low-level helpers for the readers (text and tables) and writers."""

from __future__ import annotations

import codecs
import os
from pathlib import Path

__all__ = ["COMPRESSED_SUFFIXES", "decode", "open_compressed", "read_lines"]

#: Compressed TREC files, by extension: read through the standard library's decompressors.
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz")


def open_compressed(path: str | os.PathLike[str]):
    """A binary file object decompressing ``path`` by its extension, or None for a plain file."""
    suffix = os.fspath(path).lower().rsplit(".", 1)[-1]
    if suffix == "gz":
        import gzip

        return gzip.open(path, "rb")
    if suffix == "bz2":
        import bz2

        return bz2.open(path, "rb")
    if suffix == "xz":
        import lzma

        return lzma.open(path, "rb")
    return None


def read_lines(path: str | os.PathLike[str]) -> list[bytes]:
    """Read ``path`` in one go and split it into raw lines.

    Working on ``bytes`` keeps the semantics of the C tools these formats come from: ``bytes.split()``
    splits on ASCII whitespace only (C ``isspace``) and ``bytes.splitlines()`` on ``\\n``, ``\\r`` and
    ``\\r\\n`` only, whereas ``str`` methods would also split on e.g. NBSP, ``\\x85`` or ``\\u2028``.
    A leading UTF-8 byte-order mark is dropped.
    """
    data = Path(path).read_bytes()
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    return data.splitlines()


def decode(raw: bytes) -> str:
    """Decode an identifier (qid, docno); undecodable bytes survive as surrogate escapes."""
    return raw.decode("utf-8", errors="surrogateescape")
