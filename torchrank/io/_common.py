"""Shared low-level helpers for the text readers."""

from __future__ import annotations

import codecs
import os
from pathlib import Path

__all__ = ["decode", "read_lines"]


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
