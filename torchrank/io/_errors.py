"""Exception raised for malformed TREC / SVMlight input files."""

from __future__ import annotations

import os

__all__ = ["TrecFormatError"]


def _as_text(got: object) -> object:
    """Decode raw ``bytes`` so that messages show ``'301 Q0 d1'`` rather than ``b'301 Q0 d1'``."""
    if isinstance(got, (bytes, bytearray)):
        return bytes(got).decode("utf-8", errors="backslashreplace")
    return got


class TrecFormatError(ValueError):
    """A TREC qrels/run file or an SVMlight/LETOR file is malformed.

    The message always reads ``"{path}:{lineno}: {expected}, got {got!r}"``; ``lineno`` is 1-based and
    ``0`` when the problem concerns the file as a whole (e.g. a file without any data line).

    Attributes:
        path: The offending file.
        lineno: 1-based line number, or 0 for whole-file problems.
        expected: What the reader expected to find.
        got: The offending line or field (``bytes`` are decoded for display).

    Example:
        >>> err = TrecFormatError("run.txt", 3, "a float score", "abc")
        >>> str(err)
        "run.txt:3: a float score, got 'abc'"
        >>> isinstance(err, ValueError)
        True
    """

    def __init__(self, path: str | os.PathLike[str], lineno: int, expected: str, got: object) -> None:
        self.path = os.fspath(path)
        self.lineno = lineno
        self.expected = expected
        self.got = _as_text(got)
        super().__init__(f"{self.path}:{lineno}: {expected}, got {self.got!r}")

    def __reduce__(self) -> tuple[type[TrecFormatError], tuple[str, int, str, object]]:
        # Exception pickling re-calls ``cls(*self.args)``; our args differ from the message.
        return (type(self), (self.path, self.lineno, self.expected, self.got))
