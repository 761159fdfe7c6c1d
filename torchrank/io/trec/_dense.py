"""Dicts of qrels and a run as a :class:`TrecBatch`: dense padded tensors ranked the way ``trec_eval`` ranks them."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, fields
from itertools import repeat

import numpy as np
import torch
from torch import Tensor


@dataclass(frozen=True, eq=False)
class TrecBatch:
    """Dense, padded view of a run evaluated against qrels (see :func:`trec_to_dense`).

    Row ``i`` describes query ``qids[i]``; the columns of ``preds``/``target``/``mask``/``judged`` are
    the retrieved documents in ``trec_eval`` rank order (score descending, ties by docno descending),
    padded on the right.

    Attributes:
        qids: Evaluated queries, sorted (string order, as ``trec_eval``).
        preds: ``[Q, N]`` floating scores as ranked (rounded to float32 where the batch was ranked as
            trec_eval 9.x ranks, see ``score_dtype``), 0 at padded positions.
        target: ``[Q, N]`` int64 relevance of each retrieved document (unjudged and negative labels
            give 0; padding 0).
        mask: ``[Q, N]`` bool, True for real retrieved documents.
        judged: ``[Q, N]`` bool, True where the retrieved document has a qrels entry with label >= 0.
        ideal_target: ``[Q, M]`` int64 labels of all judged (label >= 0) qrels documents of each query,
            sorted descending, padded with 0 (``M`` = largest number of judged documents of a query).
        docnos: Docnos of each row, in column order (decoded on first access when read by
            :func:`read_trec`).
        num_judged: ``[Q]`` int64 number of judged (label >= 0) qrels documents of each query, retrieved
            or not (bpref's judged non-relevant documents are those below the relevance level).
        runid: The run's tag (sixth field of its last line, trec_eval's runid) when read by :func:`read_trec`.
        pooled_unjudged: ``[Q, N]`` bool, True where the retrieved document has a negative qrels label: in the
            judgment pool but not judged (trec_eval's infAP reads it; other measures see it as unjudged).
        in_run: ``[Q]`` bool, True for the queries the run has lines for (False: a qrels query added by
            ``all_queries``, trec_eval ``-c``; a query whose lines ``judged_only`` all dropped stays True).
        all_queries: Read with ``all_queries=True`` (trec_eval ``-c``): every qrels query is a row.
        judged_only: Read with ``judged_only=True`` (trec_eval ``-J``): the unjudged documents were dropped.
    """

    qids: list[str]
    preds: Tensor
    target: Tensor
    mask: Tensor
    judged: Tensor
    ideal_target: Tensor
    docnos: Sequence[list[str]]
    num_judged: Tensor | None = None
    runid: str | None = None
    pooled_unjudged: Tensor | None = None
    in_run: Tensor | None = None
    all_queries: bool = False
    judged_only: bool = False

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
    """Like ``torch.tensor(values, dtype=dtype)`` but faster for long lists of numbers
    (benchmarks/notes/code_comment_timings.md)."""
    try:
        buf = array(typecode, values)
    except (TypeError, OverflowError):  # e.g. float labels in a user-made qrels dict
        return torch.tensor(values, dtype=dtype)
    if not len(buf):
        return torch.empty(0, dtype=dtype)
    out = torch.frombuffer(buf, dtype=_BUFFER_DTYPE[typecode])
    return out if out.dtype == dtype else out.to(dtype)


_BUFFER_DTYPE = {"d": torch.float64, "q": torch.int64, "b": torch.int8}

#: The precisions scores can be ranked in: trec_eval 9.x's C ``float``, or the parsed doubles (10.0's).
SCORE_DTYPES = (torch.float32, torch.float64)


def check_score_dtype(score_dtype: torch.dtype) -> None:
    """Reject a ``score_dtype`` other than float32 (trec_eval 9.x's) and float64 (the parsed doubles, 10.0's)."""
    if score_dtype not in SCORE_DTYPES:
        raise ValueError(f"score_dtype must be torch.float32 or torch.float64, got {score_dtype}")


def round_scores(score: np.ndarray, score_dtype: torch.dtype) -> np.ndarray:
    """float64 ``score`` rounded to ``score_dtype`` and back, the values documents are ranked by.

    trec_eval 9.x (and pytrec_eval) keeps each score in a C ``float`` (``float sim``, assigned the double ``atof``
    parsed), so scores equal once rounded to float32 are tied for it and ordered by docno; 10.0 keeps the double.
    numpy's cast rounds to nearest (ties to even, subnormals kept, overflow to infinity) exactly as C's
    ``(float)`` conversion of the double does; rounding the double, never the text, avoids the double rounding
    a direct text-to-float32 parse would differ by.
    """
    if score_dtype == torch.float64:
        return score
    with np.errstate(over="ignore"):  # beyond float32's range a score becomes +-inf, as in C
        return score.astype(np.float32).astype(np.float64)


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
    judged_only: bool = False,
    score_dtype: torch.dtype = torch.float64,
) -> TrecBatch:
    """Turn qrels and a run into padded ``[Q, N]`` tensors ranked by ``trec_eval``'s rule.

    Within each row documents are ordered by score descending, ties broken by docno descending (plain
    string comparison, like ``strcmp``), so a stable ``ties="first"`` treatment downstream reproduces
    ``trec_eval``'s order. By default the scores are the dicts' float64 values, so scores that differ only
    beyond float32's precision stay distinct, as trec_eval 10.0 ranks them; 9.x and pytrec_eval keep each
    score in a C ``float`` and rank such scores as ties: pass ``score_dtype=torch.float32`` for their ranking.
    The ranking uses the ``score_dtype`` scores whatever ``dtype`` is.

    Args:
        qrels: ``{qid: {docno: rel}}`` as returned by :func:`read_qrels`.
        run: ``{qid: {docno: score}}`` as returned by :func:`read_run`.
        depth: Keep only the first ``depth`` documents of each query (``trec_eval -M``).
        all_queries: Also evaluate qrels queries absent from the run, as rows whose ``mask`` is all
            False (``trec_eval -c``). Run queries without qrels are always dropped.
        dtype: Floating dtype of ``preds``; float64 (default) keeps every ranked score exactly.
        judged_only: Drop the documents without a judgment (label >= 0) from the top ``depth``
            (``trec_eval -J``): the judged documents below them move up.
        score_dtype: Precision the scores are ranked in: ``torch.float64`` (default), the given values, or
            ``torch.float32``, each score rounded to the nearest float32 as trec_eval 9.x stores it. ``preds``
            holds the scores as ranked (rounded, with float32), so a downstream sort keeps this order.

    Returns:
        A :class:`TrecBatch`. ``N`` (and ``M``) is at least 1.

    Raises:
        ValueError: No query to evaluate (run and qrels share no query and ``all_queries`` is False),
            a NaN score, a non-floating ``dtype``, a ``score_dtype`` other than float32 / float64, or a
            ``depth`` below 1.

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
        >>> run = {"q1": {"a": 16777217.0, "b": 16777216.0}}  # equal once rounded to float32
        >>> trec_to_dense(qrels, run).docnos, trec_to_dense(qrels, run, score_dtype=torch.float32).docnos
        ([['a', 'b']], [['b', 'a']])
    """
    check_score_dtype(score_dtype)
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise ValueError(f"depth must be a positive int or None, got {depth!r}")
    if not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating dtype, got {dtype}")
    qids = sorted(qrels) if all_queries else sorted(qrels.keys() & run.keys())
    if not qids:
        if not run or not qrels:
            raise ValueError("no query to evaluate: the run or the qrels is empty")
        raise ValueError(
            f"the run and qrels share no query (run queries: {_preview(run)}; qrels queries: {_preview(qrels)})"
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
    score = torch.from_numpy(round_scores(score.numpy(), score_dtype))
    count_t = _tensor(counts, "q", torch.int64)
    row = torch.repeat_interleave(torch.arange(num_q), count_t)
    order = _rank_order(row, score, docnos)

    label = _tensor(labels, "q", torch.int64)[order]
    in_pool = _tensor(in_qrels, "b", torch.bool)[order]
    in_run = count_t > 0

    # Rank within the row and truncate at depth, then (trec_eval -J) drop the unjudged documents: trec_eval cuts
    # first, and the judged documents below the dropped ones move up (form_res_rels.c)
    row = row[order]
    if depth is not None:
        pos = torch.arange(row.numel()) - (torch.cumsum(count_t, 0) - count_t)[row]
        keep = pos < depth
        order, row, label, in_pool = order[keep], row[keep], label[keep], in_pool[keep]
        count_t = count_t.clamp(max=depth)
    if judged_only:
        keep = in_pool & (label >= 0)
        order, row, label, in_pool = order[keep], row[keep], label[keep], in_pool[keep]
        count_t = torch.bincount(row, minlength=num_q)
    width = max(int(count_t.max()), 1)

    preds = _pack(row, score[order], count_t, width, dtype)
    target = _pack(row, label.clamp(min=0), count_t, width, torch.int64)
    judged = _pack(row, in_pool & (label >= 0), count_t, width, torch.bool)
    pooled_unjudged = _pack(row, in_pool & (label < 0), count_t, width, torch.bool)
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
        num_judged=icounts,
        pooled_unjudged=pooled_unjudged,
        in_run=in_run,
        all_queries=all_queries,
        judged_only=judged_only,
    )
