"""Readers for TREC qrels and run files, and conversion to dense padded tensors.

The parsing follows ``trec_eval`` (https://github.com/usnistgov/trec_eval):

* fields are separated by ASCII whitespace (any mix of spaces and tabs);
* a line whose first non-blank character is ``#`` is a comment, blank lines are skipped; a ``#``
  anywhere else (e.g. inside a docno such as ``CR#93E-1860``) is ordinary text;
* qrels lines are ``qid iter docno rel`` (exactly four fields, integer ``rel``, possibly negative);
* run lines are ``qid Q0 docno rank score tag`` (at least six fields, trailing fields ignored; the rank
  field is ignored as well, ``score`` is a C double);
* documents of a query are ranked by score descending, ties broken by docno descending (``strcmp``).

Unlike ``trec_eval``, the readers are strict: a docno repeated within one query (in qrels or run) is
an error, as is a NaN score.
"""

from __future__ import annotations

import os
from array import array
from dataclasses import dataclass, fields
from itertools import repeat
from pathlib import Path

import torch
from torch import Tensor

from ._common import decode, read_lines
from ._errors import TrecFormatError

__all__ = [
    "SAMPLE_QRELS",
    "SAMPLE_RUN",
    "TrecBatch",
    "read_qrels",
    "read_run",
    "trec_to_dense",
]

_DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "trec"
#: Path of the qrels of trec_eval's test suite bundled with torchrank (3 queries, 3681 judgments).
SAMPLE_QRELS: Path = _DATA_DIR / "qrels.test"
#: Path of the run of trec_eval's test suite bundled with torchrank (3 queries x 500 documents).
SAMPLE_RUN: Path = _DATA_DIR / "results.test"

_HASH = ord("#")


def _no_data(path: str | os.PathLike[str], lines: list[bytes], what: str) -> TrecFormatError:
    head = b"\n".join(lines[:3])[:200]
    return TrecFormatError(path, 0, f"at least one {what} line", head)


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
        TrecFormatError: A line without exactly four fields, a non-integer relevance, a docno repeated
            within a query, or a file without any data line.

    Example:
        >>> from torchrank.io import SAMPLE_QRELS, read_qrels
        >>> qrels = read_qrels(SAMPLE_QRELS)
        >>> sorted(qrels)
        ['301', '302', '303']
        >>> qrels["301"]["CR93E-1282"], len(qrels["302"])
        (1, 1061)
    """
    lines = read_lines(path)
    qrels: dict[str, dict[str, int]] = {}
    by_raw: dict[bytes, dict[str, int]] = {}
    n = 0
    for lineno, line in enumerate(lines, 1):
        parts = line.split()
        if not parts or parts[0][0] == _HASH:
            continue
        if len(parts) != 4:
            raise TrecFormatError(path, lineno, "4 whitespace-separated fields 'qid iter docno rel'", line)
        qraw, _, draw, rraw = parts
        try:
            rel = int(rraw)
        except ValueError:
            rel = None
        if rel is None or b"_" in rraw:
            raise TrecFormatError(path, lineno, "an integer relevance in field 4", rraw)
        docs = by_raw.get(qraw)
        if docs is None:
            docs = by_raw[qraw] = qrels.setdefault(decode(qraw), {})
        docno = decode(draw)
        if docno in docs:
            raise TrecFormatError(
                path, lineno, f"each docno at most once per query (qid {decode(qraw)})", line
            )
        docs[docno] = rel
        n += 1
    if not n:
        raise _no_data(path, lines, "'qid iter docno rel'")
    return qrels


def read_run(path: str | os.PathLike[str]) -> dict[str, dict[str, float]]:
    """Read a TREC run (results) file.

    Each data line is ``qid Q0 docno rank score tag``; fields after the sixth are ignored (as
    ``trec_eval`` does), the ``Q0`` and ``rank`` fields are ignored too, and ``score`` is parsed as a
    float (a C double). The order of the lines does not matter: ranking is done by
    :func:`trec_to_dense`.

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
    lines = read_lines(path)
    run: dict[str, dict[str, float]] = {}
    by_raw: dict[bytes, dict[str, float]] = {}
    n = 0
    for lineno, line in enumerate(lines, 1):
        parts = line.split()
        if not parts or parts[0][0] == _HASH:
            continue
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
        qraw = parts[0]
        docs = by_raw.get(qraw)
        if docs is None:
            docs = by_raw[qraw] = run.setdefault(decode(qraw), {})
        docno = decode(parts[2])
        if docno in docs:
            raise TrecFormatError(
                path, lineno, f"each docno at most once per query (qid {decode(qraw)})", line
            )
        docs[docno] = score
        n += 1
    if not n:
        raise _no_data(path, lines, "'qid Q0 docno rank score tag'")
    return run


@dataclass(frozen=True, eq=False)
class TrecBatch:
    """Dense, padded view of a run evaluated against qrels (see :func:`trec_to_dense`).

    Row ``i`` describes query ``qids[i]``; the columns of ``preds``/``target``/``mask``/``judged`` are
    the retrieved documents in ``trec_eval`` rank order (score descending, ties by docno descending),
    padded on the right.

    Attributes:
        qids: Evaluated queries, sorted (string order, as ``trec_eval``).
        preds: ``[Q, N]`` floating scores, 0 at padded positions.
        target: ``[Q, N]`` int64 relevance of each retrieved document (unjudged and negative labels
            give 0; padding 0).
        mask: ``[Q, N]`` bool, True for real retrieved documents.
        judged: ``[Q, N]`` bool, True where the retrieved document has a qrels entry with label >= 0.
        ideal_target: ``[Q, M]`` int64 labels of all judged (label >= 0) qrels documents of each query,
            sorted descending, padded with 0 (``M`` = largest number of judged documents of a query).
        docnos: Docnos of each row, in column order.
    """

    qids: list[str]
    preds: Tensor
    target: Tensor
    mask: Tensor
    judged: Tensor
    ideal_target: Tensor
    docnos: list[list[str]]

    def to(self, device: torch.device | str) -> TrecBatch:
        """Return a copy with every tensor moved to ``device``."""
        kw = {
            f.name: (v.to(device) if isinstance(v, Tensor) else v)
            for f in fields(self)
            for v in (getattr(self, f.name),)
        }
        return TrecBatch(**kw)


def _preview(d: dict[str, object], n: int = 5) -> str:
    keys = sorted(d)
    return ", ".join(keys[:n]) + (f", ... ({len(keys)} in all)" if len(keys) > n else "")


def _pack(row: Tensor, values: Tensor, counts: Tensor, width: int, dtype: torch.dtype) -> Tensor:
    """Scatter ``values`` (grouped by ascending ``row``) into a zero-padded ``[len(counts), width]``."""
    out = torch.zeros((counts.numel(), width), dtype=dtype)
    if row.numel():
        offsets = torch.cumsum(counts, 0) - counts
        col = torch.arange(row.numel()) - offsets[row]
        out[row, col] = values.to(dtype)
    return out


def _tensor(values: list, typecode: str, dtype: torch.dtype) -> Tensor:
    """Like ``torch.tensor(values, dtype=dtype)`` but several times faster for long lists of numbers."""
    try:
        buf = array(typecode, values)
    except (TypeError, OverflowError):  # e.g. float labels in a user-made qrels dict
        return torch.tensor(values, dtype=dtype)
    if not len(buf):
        return torch.empty(0, dtype=dtype)
    out = torch.frombuffer(buf, dtype=_BUFFER_DTYPE[typecode])
    return out if out.dtype == dtype else out.to(dtype)


_BUFFER_DTYPE = {"d": torch.float64, "q": torch.int64, "b": torch.int8}


def _rank_order(row: Tensor, score: Tensor, docnos: list[str]) -> Tensor:
    """Permutation sorting items by (row asc, score desc, docno desc)."""
    order = torch.argsort(score, descending=True, stable=True)
    order = order[torch.argsort(row[order], stable=True)]
    s, r = score[order], row[order]
    tie = (s[1:] == s[:-1]) & (r[1:] == r[:-1])
    if not bool(tie.any()):
        return order
    # Only items tied with a neighbour need their docnos compared; Python's str order is the byte order
    # of the UTF-8 encoding, i.e. strcmp's order. Equal docnos can only occur in different rows, so any
    # consistent numbering of the sorted docnos will do.
    in_tie = torch.zeros(order.numel(), dtype=torch.bool)
    in_tie[1:] |= tie
    in_tie[:-1] |= tie
    tied = order[in_tie]
    tied_docs = list(map(docnos.__getitem__, tied.tolist()))
    by_docno = sorted(range(len(tied_docs)), key=tied_docs.__getitem__)
    drank = torch.zeros(order.numel(), dtype=torch.int64)
    drank[tied[_tensor(by_docno, "q", torch.int64)]] = torch.arange(len(by_docno))
    order = torch.argsort(drank, descending=True, stable=True)
    order = order[torch.argsort(score[order], descending=True, stable=True)]
    return order[torch.argsort(row[order], stable=True)]


def trec_to_dense(
    qrels: dict[str, dict[str, int]],
    run: dict[str, dict[str, float]],
    *,
    depth: int | None = None,
    all_queries: bool = False,
    dtype: torch.dtype = torch.float64,
) -> TrecBatch:
    """Turn qrels and a run into padded ``[Q, N]`` tensors ranked the way ``trec_eval`` ranks them.

    Within each row documents are ordered by score descending, ties broken by docno descending (plain
    string comparison, like ``strcmp``), so a stable ``ties="first"`` treatment downstream reproduces
    ``trec_eval``. The ranking uses the float64 scores whatever ``dtype`` is.

    Args:
        qrels: ``{qid: {docno: rel}}`` as returned by :func:`read_qrels`.
        run: ``{qid: {docno: score}}`` as returned by :func:`read_run`.
        depth: Keep only the first ``depth`` documents of each query (``trec_eval -M``).
        all_queries: Also evaluate qrels queries absent from the run, as rows whose ``mask`` is all
            False (``trec_eval -c``). Run queries without qrels are always dropped.
        dtype: Floating dtype of ``preds``; float64 (default) keeps distinct doubles distinct.

    Returns:
        A :class:`TrecBatch`. ``N`` (and ``M``) is at least 1.

    Raises:
        ValueError: No query to evaluate (run and qrels share no query and ``all_queries`` is False),
            a NaN score, a non-floating ``dtype`` or a ``depth`` below 1.

    Example:
        >>> qrels = {"q1": {"d1": 1, "d2": 0, "d3": -1, "d5": 2}, "q2": {"d9": 2}}
        >>> run = {"q1": {"d1": 0.5, "d2": 0.9, "d4": 0.9, "d3": 0.1}, "q3": {"d1": 1.0}}
        >>> b = trec_to_dense(qrels, run)
        >>> b.qids, b.docnos
        (['q1'], [['d4', 'd2', 'd1', 'd3']])
        >>> b.preds
        tensor([[0.9000, 0.9000, 0.5000, 0.1000]], dtype=torch.float64)
        >>> b.target
        tensor([[0, 0, 1, 0]])
        >>> b.judged
        tensor([[False,  True,  True, False]])
        >>> b.ideal_target
        tensor([[2, 1, 0]])
        >>> b = trec_to_dense(qrels, run, depth=2, all_queries=True)
        >>> b.qids, b.mask
        (['q1', 'q2'], tensor([[ True,  True], [False, False]]))
    """
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise ValueError(f"depth must be a positive int or None, got {depth!r}")
    if not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating dtype, got {dtype}")
    qids = sorted(qrels) if all_queries else sorted(qrels.keys() & run.keys())
    if not qids:
        if not run or not qrels:
            raise ValueError("no query to evaluate: the run or the qrels is empty")
        raise ValueError(
            "the run and qrels share no query "
            f"(run queries: {_preview(run)}; qrels queries: {_preview(qrels)})"
        )
    num_q = len(qids)
    empty: dict = {}

    # Flatten once (C-level extends/maps, no per-item bytecode).
    docnos: list[str] = []
    scores: list[float] = []
    labels: list[int] = []
    in_qrels: list[bool] = []
    counts: list[int] = []
    ideal: list[int] = []
    ideal_counts: list[int] = []
    for q in qids:
        docs = run.get(q, empty)
        qr = qrels.get(q, empty)
        keys = list(docs)
        docnos += keys
        scores += docs.values()
        labels += map(qr.get, keys, repeat(0))
        in_qrels += map(qr.__contains__, keys)
        counts.append(len(keys))
        ideal += qr.values()
        ideal_counts.append(len(qr))

    score = _tensor(scores, "d", torch.float64)
    if bool(torch.isnan(score).any()):
        raise ValueError("the run contains NaN scores")
    count_t = _tensor(counts, "q", torch.int64)
    row = torch.repeat_interleave(torch.arange(num_q), count_t)
    order = _rank_order(row, score, docnos)

    # Rank within the row, then truncate at depth.
    row = row[order]
    pos = torch.arange(row.numel()) - (torch.cumsum(count_t, 0) - count_t)[row]
    if depth is not None:
        keep = pos < depth
        order, row = order[keep], row[keep]
        count_t = count_t.clamp(max=depth)
    width = max(int(count_t.max()), 1)

    label = _tensor(labels, "q", torch.int64)[order]
    preds = _pack(row, score[order], count_t, width, dtype)
    target = _pack(row, label.clamp(min=0), count_t, width, torch.int64)
    judged = _pack(row, _tensor(in_qrels, "b", torch.bool)[order] & (label >= 0), count_t, width, torch.bool)
    mask = _pack(row, torch.ones(row.numel(), dtype=torch.bool), count_t, width, torch.bool)

    ordered_docnos = list(map(docnos.__getitem__, order.tolist()))
    ends = torch.cumsum(count_t, 0).tolist()
    starts = [0, *ends[:-1]]
    row_docnos = [ordered_docnos[s:e] for s, e in zip(starts, ends, strict=True)]

    # Ideal list: judged (>= 0) labels of each query, sorted descending.
    ivals = _tensor(ideal, "q", torch.int64)
    irow = torch.repeat_interleave(torch.arange(num_q), _tensor(ideal_counts, "q", torch.int64))
    keep = ivals >= 0
    ivals, irow = ivals[keep], irow[keep]
    iorder = torch.argsort(ivals, descending=True, stable=True)
    iorder = iorder[torch.argsort(irow[iorder], stable=True)]
    icounts = torch.bincount(irow, minlength=num_q)
    ideal_target = _pack(irow[iorder], ivals[iorder], icounts, max(int(icounts.max()), 1), torch.int64)

    return TrecBatch(
        qids=qids,
        preds=preds,
        target=target,
        mask=mask,
        judged=judged,
        ideal_target=ideal_target,
        docnos=row_docnos,
    )
