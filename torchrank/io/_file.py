"""A qrels or run file read as columns (:class:`TrecFile`), whichever reader made it: TREC text
(:mod:`torchrank.io.trec`) or a table (:mod:`torchrank.io.frames`); both build on this module."""

from __future__ import annotations

import os

import numpy as np

from . import _scan
from ._common import decode

__all__ = ["TrecFile", "first_duplicate"]


class TrecFile:
    """A qrels or run file read by :func:`~torchrank.io.load_qrels` / :func:`~torchrank.io.load_run` (or a table),
    kept as columns for fast joins.

    Attributes:
        path: The file.
        kind: ``"qrels"`` or ``"run"``.
        qids: Distinct qids, in order of first appearance.
        runid: A run's tag (sixth field of its last data line, trec_eval's runid); None for qrels.
    """

    def __init__(self, path: str | os.PathLike[str], kind: str, columns: _scan.Columns) -> None:
        self.path = os.fspath(path)
        self.kind = kind
        self.columns = columns
        self.qids = columns.qids
        self.runid = None if columns.tag is None else decode(columns.tag)

    def __len__(self) -> int:
        """Number of data lines."""
        return len(self.columns)

    def __repr__(self) -> str:
        return f"TrecFile({self.path!r}, kind={self.kind!r}, lines={len(self)}, queries={len(self.qids)})"



def first_duplicate(c: _scan.Columns) -> int | None:
    """Index of the earliest line repeating an earlier line's (qid, docno), or None."""
    if len(c) < 2:
        return None
    h = _scan.combine(c.doc_hash, c.qid)
    hs = np.sort(h)
    if not (hs[1:] == hs[:-1]).any():  # the usual answer, for the price of one sort
        return None
    order = np.argsort(h, kind="stable")
    hs = h[order]
    same = np.flatnonzero(hs[1:] == hs[:-1])
    later, earlier = order[same + 1], order[same]
    exact = (c.qid[later] == c.qid[earlier]) & (c.key[later] == c.key[earlier]).all(axis=1)
    if not exact.any():
        return None
    # with a stable sort, every line of an equal run follows its predecessor in file order
    return int(later[exact].min())
