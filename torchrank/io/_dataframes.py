"""DataFrames to and from batches: :func:`from_dataframe` (the tables read by :mod:`torchrank.io.frames`, joined
by :func:`~torchrank.io.read_trec`) and :func:`to_dataframe`. Above both the table readers and the TREC join,
which reads tables too (``load_run("run.parquet")``); public through :mod:`torchrank.io`."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from torchrank._extras import require

from ._file import TrecFile
from .frames import qrels_from_dataframe, run_from_dataframe
from .trec import TrecBatch, read_trec

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["from_dataframe", "to_dataframe"]


def from_dataframe(
    run: pd.DataFrame | TrecFile,
    qrels: pd.DataFrame | TrecFile | str | os.PathLike[str],
    *,
    qid: str = "qid",
    docno: str = "docno",
    score: str = "score",
    label: str = "label",
    depth: int | None = None,
    all_queries: bool = False,
    judged_only: bool = False,
) -> TrecBatch:
    """A run and its qrels as DataFrames (PyTerrier's columns by default) -> :class:`~torchrank.io.TrecBatch`.

    The batch is :func:`~torchrank.io.read_trec`'s for the same rows written as TREC files: rank order, ties
    (scores compared as doubles, as trec_eval 10.0), judged flags and options (``depth``:
    trec_eval ``-M``, ``all_queries``: ``-c``, ``judged_only``: ``-J``).
    ``qrels`` may also be a qrels file (any format :func:`~torchrank.io.load_qrels` reads).
    """
    run_file = run if isinstance(run, TrecFile) else run_from_dataframe(run, qid=qid, docno=docno, score=score)
    if isinstance(qrels, TrecFile | str | os.PathLike):
        qrels_file = qrels
    else:
        qrels_file = qrels_from_dataframe(qrels, qid=qid, docno=docno, label=label)
    return read_trec(qrels_file, run_file, depth=depth, all_queries=all_queries, judged_only=judged_only)


def to_dataframe(file: TrecFile | TrecBatch) -> pd.DataFrame:
    """A run or qrels as a DataFrame with PyTerrier's columns (``qid, docno, score`` or ``qid, docno, label``).

    A :class:`~torchrank.io.TrecBatch` gives its ranked documents with ``rank`` (0-based, as PyTerrier), ``score``
    and ``label`` (the judged label; unjudged documents are NaN).

    Example:
        >>> from torchrank.io import SAMPLE_RUN, load_run
        >>> frame = to_dataframe(load_run(SAMPLE_RUN))
        >>> list(frame.columns), len(frame)
        (['qid', 'docno', 'score'], 1500)
    """
    pd = require("pandas", "to_dataframe")

    if isinstance(file, TrecBatch):
        mask = file.mask.cpu().numpy()
        rows, cols = np.nonzero(mask)
        label = file.target.cpu().numpy()[rows, cols].astype(np.float64)
        label[~file.judged.cpu().numpy()[rows, cols]] = np.nan
        return pd.DataFrame({
            "qid": [file.qids[r] for r in rows], "docno": [file.docnos[r][c] for r, c in zip(rows, cols, strict=True)],
            "rank": cols, "score": file.preds.cpu().numpy()[rows, cols], "label": label,
        })  # fmt: skip
    c = file.columns
    qid = np.asarray(c.qids, dtype=object)[c.qid] if len(c.qids) else np.zeros(0, dtype=object)
    docno = [c.docno(i) for i in range(len(c))]
    value = "score" if file.kind == "run" else "label"
    return pd.DataFrame({"qid": qid, "docno": docno, value: c.value})
