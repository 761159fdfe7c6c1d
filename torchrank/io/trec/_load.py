"""The fast path: whole TREC files scanned with numpy (:mod:`torchrank.io._scan`), joined and ranked without
dicts; the same batches and errors as the text readers (:mod:`._text`) and :func:`trec_to_dense`."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import fields

import numpy as np
import torch
from torch import Tensor

from .. import _scan
from .._errors import TrecFormatError
from .._file import TrecFile, first_duplicate
from ..frames import read_table, table_format
from ._dense import TrecBatch, _preview, check_score_dtype, round_scores, trec_to_dense
from ._text import (
    _QRELS_WHAT,
    _RUN_WHAT,
    ProgressCallback,
    _duplicate,
    _no_data,
    _qrels_line,
    _read_padded,
    _run_line,
    read_lines,
    read_qrels,
    read_run,
)


def load_qrels(path: str | os.PathLike[str], *, progress: ProgressCallback | None = None) -> TrecFile:
    """Read a qrels file as columns (vectorised; errors exactly as :func:`read_qrels` reports them).

    TREC text, compressed by extension (``.gz``, ``.bz2``, ``.xz``), or a table with PyTerrier's columns
    ``qid, docno, label`` (``.parquet``, ``.csv``, ``.tsv``: :func:`torchrank.io.frames.read_table`).

    Example:
        >>> from torchrank.io import SAMPLE_QRELS, load_qrels
        >>> qrels = load_qrels(SAMPLE_QRELS)
        >>> len(qrels), qrels.qids
        (3681, ['301', '302', '303'])
    """
    table = _table(path, "qrels", progress)
    return table if table is not None else TrecFile(path, "qrels", _load(path, "qrels", progress))


def load_run(path: str | os.PathLike[str], *, progress: ProgressCallback | None = None) -> TrecFile:
    """Read a run file as columns (vectorised; errors exactly as :func:`read_run` reports them).

    TREC text, compressed by extension (``.gz``, ``.bz2``, ``.xz``), or a table with PyTerrier's columns
    ``qid, docno, score`` (``.parquet``, ``.csv``, ``.tsv``: :func:`torchrank.io.frames.read_table`; its runid
    is the file name without extensions).

    Example:
        >>> from torchrank.io import SAMPLE_RUN, load_run
        >>> run = load_run(SAMPLE_RUN)
        >>> len(run), run.runid
        (1500, 'STANDARD')
    """
    table = _table(path, "run", progress)
    return table if table is not None else TrecFile(path, "run", _load(path, "run", progress))


def _table(path: str | os.PathLike[str], kind: str, progress: ProgressCallback | None) -> TrecFile | None:
    """A parquet / CSV / TSV file read as a table (by its name), else None."""
    return read_table(path, kind, progress=progress) if table_format(path) else None


def read_trec(
    qrels: str | os.PathLike[str] | TrecFile,
    run: str | os.PathLike[str] | TrecFile,
    *,
    depth: int | None = None,
    all_queries: bool = False,
    dtype: torch.dtype = torch.float64,
    progress: ProgressCallback | None = None,
    judged_only: bool = False,
    score_dtype: torch.dtype = torch.float64,
) -> TrecBatch:
    """Read qrels and a run into a :class:`TrecBatch` ranked exactly as ``trec_eval`` 10.0 ranks the files.

    Same result as ``trec_to_dense(read_qrels(qrels), read_run(run), ...)`` (same rows, columns, tie order and
    errors), faster on large files: the files are scanned with numpy, documents are matched to
    judgments through a hash table of exact docno bytes, and runs already written in rank order (the usual case)
    are not sorted again. ``docnos`` are decoded on first access.

    Scores are ranked as parsed doubles, as trec_eval 10.0 does (its ``double sim``). trec_eval 9.x and
    pytrec_eval keep each score in a C ``float``: ``score_dtype=torch.float32`` ranks as they do, by each double
    rounded to the nearest float32, so scores that differ only beyond float32's precision (``16777217`` and
    ``16777216``, ``0.1000000001`` and ``0.1000000002``) are ties, ordered by docno descending.

    Args:
        qrels: A qrels path, or a file already read by :func:`load_qrels` (read once, use for many runs).
        run: A run path, or a file read by :func:`load_run`.
        depth: Keep only the first ``depth`` documents of each query (``trec_eval -M``).
        all_queries: Also evaluate qrels queries absent from the run (``trec_eval -c``).
        dtype: Floating dtype of ``preds``, the scores as ranked (see ``score_dtype``) whatever it is.
        progress: Called with byte counts as files are read and scanned (for a progress bar).
        judged_only: Drop the documents without a judgment from the top ``depth`` (``trec_eval -J``).
        score_dtype: ``torch.float64`` (default): rank by the parsed doubles, as trec_eval 10.0;
            ``torch.float32``: by the scores rounded to float32, as trec_eval 9.x and pytrec_eval. ``preds`` holds
            the scores as ranked.

    Raises:
        TrecFormatError: A malformed file (see :func:`read_qrels`, :func:`read_run`).
        ValueError: No query to evaluate, or a bad ``depth`` / ``dtype`` / ``score_dtype``.

    Example:
        >>> from torchrank.io import SAMPLE_QRELS, SAMPLE_RUN, read_trec
        >>> batch = read_trec(SAMPLE_QRELS, SAMPLE_RUN)
        >>> batch.qids, tuple(batch.preds.shape), batch.runid
        (['301', '302', '303'], (3, 500), 'STANDARD')
        >>> batch.docnos[0][:2]
        ['FBIS4-50478', 'FBIS3-21938']
    """
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise ValueError(f"depth must be a positive int or None, got {depth!r}")
    if not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating dtype, got {dtype}")
    check_score_dtype(score_dtype)
    qrels_file = qrels if isinstance(qrels, TrecFile) else load_qrels(qrels, progress=progress)
    run_file = run if isinstance(run, TrecFile) else load_run(run, progress=progress)
    if not isinstance(judged_only, bool):
        raise TypeError(f"judged_only must be a bool, got {judged_only!r}")
    try:
        return _dense(qrels_file, run_file, depth, all_queries, dtype, judged_only, score_dtype)
    except _scan.Fallback:  # a 64-bit hash collision: the dict path decides exactly
        batch = trec_to_dense(
            _as_dict(qrels_file),
            _as_dict(run_file),
            depth=depth,
            all_queries=all_queries,
            dtype=dtype,
            judged_only=judged_only,
            score_dtype=score_dtype,
        )
        return TrecBatch(**{f.name: getattr(batch, f.name) for f in fields(batch)} | {"runid": run_file.runid})


def _load(path: str | os.PathLike[str], kind: str, progress: ProgressCallback | None) -> _scan.Columns:
    data, begin = _read_padded(path, progress)
    nfields, value_field = (4, 3) if kind == "qrels" else (6, 4)
    try:
        columns = _scan.scan(data, begin, nfields, value_field, progress)
    except _scan.Fallback:
        return _careful_columns(path, kind)
    except _scan.LineError as error:
        raise _line_error(path, data, begin, error.offset, kind) from None
    duplicate = first_duplicate(columns)
    if duplicate is not None:
        offset = data.rfind(b"\n", begin, int(columns.doc_start[duplicate])) + 1 or begin
        line = _line_at(data, offset)
        qraw = line.split()[0]
        raise _duplicate(path, data.count(b"\n", 0, offset) + 1, qraw, line)
    if not len(columns):
        head = bytes(data[begin : min(begin + 4096, len(data) - _scan.PAD)]).splitlines()
        raise _no_data(path, head, _QRELS_WHAT if kind == "qrels" else _RUN_WHAT)
    return columns


def _line_at(data: bytearray, offset: int) -> bytes:
    end = data.find(b"\n", offset, len(data) - _scan.PAD)
    return bytes(data[offset : len(data) - _scan.PAD if end < 0 else end]).rstrip(b"\r")


def _line_error(path: str | os.PathLike[str], data: bytearray, begin: int, offset: int, kind: str) -> Exception:
    """The careful reader's error for the data line at ``offset`` (the scan found it first)."""
    lineno = data.count(b"\n", begin, offset) + 1
    try:
        (_qrels_line if kind == "qrels" else _run_line)(path, lineno, _line_at(data, offset))
    except TrecFormatError as error:
        return error
    return TrecFormatError(path, lineno, f"a valid {kind} line", _line_at(data, offset))  # not reached


def _careful_columns(path: str | os.PathLike[str], kind: str) -> _scan.Columns:
    """Columns built from the careful line-by-line reader (files the scan cannot decide)."""
    if kind == "qrels":
        return _columns_from_dict(read_qrels(path), None)
    tag = None
    for lineno, line in enumerate(read_lines(path), 1):
        parsed = _run_line(path, lineno, line)
        if parsed is not None:
            tag = parsed[3]  # trec_eval's runid: the last data line's tag
    return _columns_from_dict(read_run(path), tag)


def _columns_from_dict(d: dict[str, dict[str, float]] | dict[str, dict[str, int]], tag: bytes | None) -> _scan.Columns:
    qids = list(d)
    docs = [doc.encode("utf-8", errors="surrogateescape") for q in qids for doc in d[q]]
    lengths = np.array([len(x) for x in docs], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64) if docs else lengths
    data = bytearray(b"".join(docs) + bytes(_scan.PAD))
    u64 = np.ndarray((len(data) - 8,), dtype="<u8", buffer=data, strides=(1,))
    key = _scan._words(u64, starts, lengths) if docs else np.zeros((0, 1), np.uint64)
    del u64
    values = [v for q in qids for v in d[q].values()]
    value = np.array(values, dtype=np.float64 if tag is not None else np.int64)
    qid = np.repeat(np.arange(len(qids), dtype=np.int32), [len(d[q]) for q in qids])
    return _scan.Columns(data, qids, qid, key, starts, lengths.astype(np.int32), _scan.mix(key), value, tag)


def _as_dict(file: TrecFile) -> dict:
    c = file.columns
    out: dict = {q: {} for q in c.qids}
    for i, (q, v) in enumerate(zip(c.qid.tolist(), c.value.tolist(), strict=True)):
        out[c.qids[q]][c.docno(i)] = v
    return out


class _HashIndex:
    """Open-addressing hash table (linear probing) from 64-bit hashes to row numbers, in numpy."""

    def __init__(self, h: np.ndarray) -> None:
        self.h = h
        size = 1 << max(4, (4 * max(len(h), 1) - 1).bit_length())  # load factor <= 1/4: short probes
        self.mask = size - 1
        self.owner = np.full(size, -1, dtype=np.int64)
        slot = (h & np.uint64(self.mask)).astype(np.intp)
        pending = np.arange(len(h))
        while pending.size:
            s = slot[pending]
            free = self.owner[s] == -1
            cand, cs = pending[free], s[free]
            taken, first = np.unique(cs, return_index=True)
            self.owner[taken] = cand[first]
            won = np.zeros(len(h), dtype=bool)
            won[cand[first]] = True
            pending = pending[~won[pending]]
            slot[pending] = (slot[pending] + 1) & self.mask

    def find(self, h: np.ndarray) -> np.ndarray:
        """Row with an equal hash for each of ``h``, -1 where none."""
        found = np.full(len(h), -1, dtype=np.int64)
        slot = (h & np.uint64(self.mask)).astype(np.intp)
        pending = np.arange(len(h))
        while pending.size:
            owner = self.owner[slot[pending]]
            empty = owner == -1
            match = ~empty
            match[match] = self.h[owner[match]] == h[pending[match]]
            found[pending[match]] = owner[match]
            pending = pending[~empty & ~match]
            slot[pending] = (slot[pending] + 1) & self.mask
        return found


def _dense(
    qrels: TrecFile,
    run: TrecFile,
    depth: int | None,
    all_queries: bool,
    dtype: torch.dtype,
    judged_only: bool = False,
    score_dtype: torch.dtype = torch.float32,
) -> TrecBatch:
    qc, rc = qrels.columns, run.columns
    judged_q = set(qc.qids)
    qids = sorted(judged_q) if all_queries else sorted(judged_q.intersection(rc.qids))
    if not qids:
        if not len(rc) or not len(qc):
            raise ValueError("no query to evaluate: the run or the qrels is empty")
        first = int(rc.doc_start[0])
        raise TrecFormatError(
            run.path,
            rc.data.count(b"\n", 0, first) + 1,
            f"queries judged in {qrels.path} (the run and qrels share no query; run queries: "
            f"{_preview(dict.fromkeys(rc.qids))}; qrels queries: {_preview(dict.fromkeys(qc.qids))})",
            f"qid {rc.qids[0]}",
        )
    num_q = len(qids)
    row_of = {q: i for i, q in enumerate(qids)}
    run_row = np.array([row_of.get(q, -1) for q in rc.qids], dtype=np.int64)[rc.qid]
    qrels_row = np.array([row_of.get(q, -1) for q in qc.qids], dtype=np.int64)[qc.qid]

    # the run's lines of evaluated queries, ranked: row, score descending, docno descending
    keep = np.flatnonzero(run_row >= 0) if (run_row < 0).any() else None
    row = run_row if keep is None else run_row[keep]
    score = round_scores(rc.value if keep is None else rc.value[keep], score_dtype)
    order = _rank_lines(row, score, rc.key, keep)
    lines = order if keep is None else keep[order]
    row, score = row[order], score[order]

    # judgments of the ranked lines: exact (qid, docno) matches through a hash table
    index = _HashIndex(_scan.combine(qc.doc_hash, qrels_row))
    match = index.find(_scan.combine(rc.doc_hash[lines], row))
    hit = np.flatnonzero(match >= 0)
    width = max(qc.key.shape[1], rc.key.shape[1])
    qkey = _widen(qc.key[match[hit]], width)
    rkey = _widen(rc.key[lines[hit]], width)
    if not ((qrels_row[match[hit]] == row[hit]).all() and (qkey == rkey).all()):
        raise _scan.Fallback  # a 64-bit hash collision
    label = np.zeros(len(row), dtype=np.int64)
    label[hit] = qc.value[match[hit]]
    judged = np.zeros(len(row), dtype=bool)
    judged[hit] = label[hit] >= 0
    pooled = np.zeros(len(row), dtype=bool)
    pooled[hit] = label[hit] < 0
    # trec_eval -M then -J: each query is cut to its top `depth` first, then the unjudged documents leave and the
    # judged ones below them move up (form_res_rels.c)
    counts = np.bincount(row, minlength=num_q)
    in_run = counts > 0
    if depth is not None and (counts > depth).any():
        col = np.arange(len(row)) - np.concatenate(([0], np.cumsum(counts)[:-1]))[row]
        kept = col < depth
        row, score, label, judged, pooled, lines = (
            row[kept], score[kept], label[kept], judged[kept], pooled[kept], lines[kept]
        )
    if judged_only:
        row, score, label, pooled, lines = row[judged], score[judged], label[judged], pooled[judged], lines[judged]
        judged = judged[judged]
    counts = np.bincount(row, minlength=num_q)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    col = np.arange(len(row)) - starts[row]
    width = max(int(counts.max()), 1)
    flat = torch.from_numpy(row * width + col)
    count_t = torch.from_numpy(counts)

    def pack(values: np.ndarray, out_dtype: torch.dtype) -> Tensor:
        out = torch.zeros(num_q * width, dtype=out_dtype)
        out[flat] = torch.from_numpy(values).to(out_dtype)
        return out.view(num_q, width)

    mask = torch.arange(width).unsqueeze(0) < count_t.unsqueeze(1)
    preds = pack(score, dtype)
    target = pack(np.maximum(label, 0), torch.int64)
    judged_t = pack(judged, torch.bool)
    pooled_t = pack(pooled, torch.bool)

    # ideal list: judged (>= 0) labels of each evaluated query, descending
    useful = (qrels_row >= 0) & (qc.value >= 0)
    irow, ival = qrels_row[useful], qc.value[useful]
    iorder = np.lexsort((-ival, irow))
    irow, ival = irow[iorder], ival[iorder]
    icounts = np.bincount(irow, minlength=num_q)
    iwidth = max(int(icounts.max()), 1)
    icol = np.arange(len(irow)) - np.concatenate(([0], np.cumsum(icounts)[:-1]))[irow]
    ideal = torch.zeros(num_q * iwidth, dtype=torch.int64)
    ideal[torch.from_numpy(irow * iwidth + icol)] = torch.from_numpy(ival)

    return TrecBatch(
        qids=qids,
        preds=preds,
        target=target,
        mask=mask,
        judged=judged_t,
        ideal_target=ideal.view(num_q, iwidth),
        docnos=_LazyDocnos(rc, lines, starts, counts),
        num_judged=torch.from_numpy(icounts),
        runid=run.runid,
        pooled_unjudged=pooled_t,
        in_run=torch.from_numpy(in_run),
        all_queries=all_queries,
        judged_only=judged_only,
    )


def _widen(key: np.ndarray, width: int) -> np.ndarray:
    return key if key.shape[1] == width else np.pad(key, ((0, 0), (0, width - key.shape[1])))


def _rank_lines(row: np.ndarray, score: np.ndarray, key: np.ndarray, keep: np.ndarray | None) -> np.ndarray:
    """Permutation ordering lines by row, then score descending, then docno descending (trec_eval)."""
    n = len(row)
    if not n:
        return np.arange(0)
    new_segment = np.empty(n, dtype=bool)
    new_segment[0] = True
    np.not_equal(row[1:], row[:-1], out=new_segment[1:])
    heads = np.flatnonzero(new_segment)
    descending = (score[1:] <= score[:-1]) | new_segment[1:]
    if len(np.unique(row[heads])) == len(heads) and descending.all():
        # each query's lines are contiguous and already in score order (runs are usually written so):
        # put the query blocks in row order without sorting lines
        seg_rows = row[heads]
        if (seg_rows[1:] > seg_rows[:-1]).all():
            order = np.arange(n)
        else:
            lengths = np.diff(np.append(heads, n))
            by_row = np.argsort(seg_rows, kind="stable")
            seg_len = lengths[by_row]
            offsets = np.repeat(heads[by_row] - np.concatenate(([0], np.cumsum(seg_len)[:-1])), seg_len)
            order = np.arange(n) + offsets
    else:
        order = np.lexsort((-score, row))
    r, s = row[order], score[order]
    tied = (r[1:] == r[:-1]) & (s[1:] == s[:-1])
    if tied.any():
        order = _order_ties(order, tied, key, keep)
    return order


def _order_ties(order: np.ndarray, tied: np.ndarray, key: np.ndarray, keep: np.ndarray | None) -> np.ndarray:
    """Within each run of equal (row, score), order lines by docno descending (strcmp order).

    ``key`` holds the docno words of every line of the file; ``keep`` maps the ranked lines to them.
    """
    member = np.zeros(len(order), dtype=bool)
    member[1:] |= tied
    member[:-1] |= tied
    slots = np.flatnonzero(member)
    group = np.cumsum(~np.concatenate(([False], tied)))[slots]  # tie-group id of each member
    lines = order[slots] if keep is None else keep[order[slots]]
    words = key[lines].byteswap()  # big-endian words compare like the bytes (strcmp)
    sort_keys = [~words[:, i] for i in range(words.shape[1] - 1, -1, -1)] + [group]  # descending docno
    out = order.copy()
    out[slots] = order[slots][np.lexsort(sort_keys)]
    return out


class _LazyDocnos(Sequence):
    """``TrecBatch.docnos`` of :func:`read_trec`: each row's docnos decoded on first access."""

    def __init__(self, columns: _scan.Columns, lines: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> None:
        self._columns, self._lines, self._starts, self._counts = columns, lines, starts, counts
        self._rows: dict[int, list[str]] = {}

    def __len__(self) -> int:
        return len(self._counts)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = range(len(self))[i]
        if i not in self._rows:
            start = int(self._starts[i])
            lines = self._lines[start : start + int(self._counts[i])].tolist()
            self._rows[i] = [self._columns.docno(j) for j in lines]
        return self._rows[i]

    def __iter__(self) -> Iterator[list[str]]:
        return (self[i] for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, Sequence) else NotImplemented

    def __repr__(self) -> str:
        return repr(list(self))
