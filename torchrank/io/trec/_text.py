"""The TREC text readers: lines parsed one by one into ``{qid: {docno: value}}`` dicts, with the exact error
messages every reader of :mod:`torchrank.io.trec` reports (the format: :mod:`torchrank.io.trec`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from .. import _scan
from .._common import decode, open_compressed
from .._errors import TrecFormatError

_DATA_DIR = Path(__file__).resolve().parents[2] / "data" / "trec"
#: Path of the qrels of trec_eval's test suite bundled with torchrank (3 queries, 3681 judgments).
SAMPLE_QRELS: Path = _DATA_DIR / "qrels.test"
#: Path of the run of trec_eval's test suite bundled with torchrank (3 queries x 500 documents).
SAMPLE_RUN: Path = _DATA_DIR / "results.test"

_HASH = ord("#")

#: ``progress(nbytes)`` is called as a file is read and scanned (twice its size in all).
ProgressCallback = Callable[[int], None]


def _file_bytes(path: str | os.PathLike[str]) -> bytes:
    """The text of a TREC file, decompressed when its name ends in ``.gz``, ``.bz2`` or ``.xz``."""
    f = open_compressed(path)
    if f is None:
        return Path(path).read_bytes()
    with f:
        return f.read()


def read_lines(path: str | os.PathLike[str]) -> list[bytes]:
    """The raw lines of a (possibly compressed) TREC file, a leading UTF-8 byte-order mark dropped."""
    data = _file_bytes(path)
    return (data[3:] if data.startswith(b"\xef\xbb\xbf") else data).splitlines()


def _read_padded(path: str | os.PathLike[str], progress: ProgressCallback | None) -> tuple[bytearray, int]:
    """:func:`_scan.read_padded` for plain and compressed files: the text plus ``PAD`` zero bytes, its offset."""
    f = open_compressed(path)
    if f is None:
        return _scan.read_padded(os.fspath(path), progress)
    with f:
        text = f.read()
    if progress is not None:
        progress(os.path.getsize(path))
    data = bytearray(len(text) + _scan.PAD)
    data[: len(text)] = text
    del text
    return data, 3 if data.startswith(b"\xef\xbb\xbf") else 0


#: The range of a qrels label (labels are stored as int64).
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

_QRELS_WHAT = "'qid iter docno rel'"
_RUN_WHAT = "'qid Q0 docno rank score tag'"


def _no_data(path: str | os.PathLike[str], lines: list[bytes], what: str) -> TrecFormatError:
    head = b"\n".join(lines[:3])[:200]
    return TrecFormatError(path, 0, f"at least one {what} line", head)


def _duplicate(path: str | os.PathLike[str], lineno: int, qraw: bytes, line: bytes) -> TrecFormatError:
    return TrecFormatError(path, lineno, f"each docno at most once per query (qid {decode(qraw)})", line)


def _qrels_line(path: str | os.PathLike[str], lineno: int, line: bytes) -> tuple[bytes, bytes, int] | None:
    """``(qid, docno, rel)`` of a qrels line, None for a comment or blank line; raises on a bad line."""
    parts = line.split()
    if not parts or parts[0][0] == _HASH:
        return None
    if len(parts) != 4:
        raise TrecFormatError(path, lineno, "4 whitespace-separated fields 'qid iter docno rel'", line)
    qraw, _, draw, rraw = parts
    try:
        rel = int(rraw)
    except ValueError:
        rel = None
    if rel is None or b"_" in rraw:
        raise TrecFormatError(path, lineno, "an integer relevance in field 4", rraw)
    if not INT64_MIN <= rel <= INT64_MAX:  # labels are int64 tensors: a bigger one would fail far from its line
        raise TrecFormatError(path, lineno, "an integer relevance in field 4 within the int64 range", rraw)
    return qraw, draw, rel


def _run_line(path: str | os.PathLike[str], lineno: int, line: bytes) -> tuple[bytes, bytes, float, bytes] | None:
    """``(qid, docno, score, tag)`` of a run line, None for a comment or blank line; raises on a bad line."""
    parts = line.split()
    if not parts or parts[0][0] == _HASH:
        return None
    if len(parts) < 6:
        raise TrecFormatError(
            path, lineno, "at least 6 whitespace-separated fields 'qid Q0 docno rank score tag'", line
        )
    sraw = parts[4]
    try:
        score = float(sraw)
    except ValueError:
        score = None
    if score is None or score != score or b"_" in sraw:
        raise TrecFormatError(path, lineno, "a numeric (non-NaN) score in field 5", sraw)
    return parts[0], parts[2], score, parts[5]


def read_qrels(path: str | os.PathLike[str]) -> dict[str, dict[str, int]]:
    """Read a TREC qrels file.

    Each data line is ``qid iter docno rel`` with exactly four whitespace-separated fields; ``iter`` is
    ignored and ``rel`` is an integer (negative values, used by some tracks for "pooled but not judged",
    are kept as they are).

    Args:
        path: The qrels file.

    Returns:
        ``{qid: {docno: rel}}``, queries and documents in file order.

    Raises:
        TrecFormatError: A line without exactly four fields, a non-integer relevance or one outside the
            int64 range, a docno repeated within a query, or a file without any data line.

    Example:
        >>> from torchrank.io import SAMPLE_QRELS, read_qrels
        >>> qrels = read_qrels(SAMPLE_QRELS)
        >>> sorted(qrels)
        ['301', '302', '303']
        >>> qrels["301"]["CR93E-1282"], len(qrels["302"])
        (1, 1061)
    """
    return _read_nested(path, _qrels_line, _QRELS_WHAT)


def read_run(path: str | os.PathLike[str]) -> dict[str, dict[str, float]]:
    """Read a TREC run (results) file.

    Each data line is ``qid Q0 docno rank score tag``; fields after the sixth are ignored (as
    ``trec_eval`` does), the ``Q0`` and ``rank`` fields are ignored too, and ``score`` is parsed as a
    Python float (a double, as C's ``atof`` parses it). The scores are returned as parsed, and trec_eval 10.0
    ranks by them; 9.x keeps each in a C ``float``, and ranks by that: :func:`read_trec` and
    :func:`trec_to_dense` with ``score_dtype=torch.float32`` round them the same way. The order of the lines
    does not matter: ranking is done by :func:`trec_to_dense`.

    Args:
        path: The run file.

    Returns:
        ``{qid: {docno: score}}``, queries and documents in file order.

    Raises:
        TrecFormatError: A line with fewer than six fields, a non-numeric or NaN score, a docno repeated
            within a query, or a file without any data line.

    Example:
        >>> import os, tempfile
        >>> with tempfile.NamedTemporaryFile("w", suffix=".run", delete=False) as f:
        ...     _ = f.write("# my run\\nq1 Q0 d1 1 2.5 tag\\nq1\\tQ0\\td#2\\t2\\t-1e3\\ttag extra\\n")
        >>> read_run(f.name)
        {'q1': {'d1': 2.5, 'd#2': -1000.0}}
        >>> os.remove(f.name)
    """
    return _read_nested(path, _run_line, _RUN_WHAT)


def _read_nested(path: str | os.PathLike[str], parse_line: Callable[..., tuple | None], what: str) -> dict:
    """``{qid: {docno: value}}`` of a qrels or run file, queries and documents in file order: ``parse_line(path,
    lineno, line)`` gives a data line's raw qid, raw docno and value first (None for a comment or blank line); a
    docno repeated within a query, or a file without a data line, raises (``what`` names the data expected)."""
    lines = read_lines(path)
    nested: dict[str, dict] = {}
    by_raw: dict[bytes, dict] = {}  # each raw qid decoded once
    n = 0
    for lineno, line in enumerate(lines, 1):
        parsed = parse_line(path, lineno, line)
        if parsed is None:
            continue
        qraw, draw, value = parsed[:3]
        docs = by_raw.get(qraw)
        if docs is None:
            docs = by_raw[qraw] = nested.setdefault(decode(qraw), {})
        docno = decode(draw)
        if docno in docs:
            raise _duplicate(path, lineno, qraw, line)
        docs[docno] = value
        n += 1
    if not n:
        raise _no_data(path, lines, what)
    return nested
