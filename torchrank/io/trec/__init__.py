"""Readers for TREC qrels and run files, and conversion to dense padded tensors.

The parsing follows ``trec_eval`` (https://github.com/usnistgov/trec_eval):

* fields are separated by ASCII whitespace (any mix of spaces and tabs);
* a line whose first non-blank character is ``#`` is a comment, blank lines are skipped; a ``#``
  anywhere else (e.g. inside a docno such as ``CR#93E-1860``) is ordinary text;
* qrels lines are ``qid iter docno rel`` (exactly four fields, integer ``rel``, possibly negative);
* run lines are ``qid Q0 docno rank score tag`` (at least six fields, trailing fields ignored; the rank
  field is ignored as well); ``score`` is parsed as a double (C's ``atof``) and ranked as one by trec_eval
  10.0 (9.x and pytrec_eval keep a C ``float``: scores equal once rounded to float32 are ties there);
* documents of a query are ranked by score descending, ties broken by docno descending (``strcmp``).

:func:`read_run` returns the parsed doubles; :func:`read_trec` and :func:`trec_to_dense` rank by the doubles,
as trec_eval 10.0 does, or by the float32-rounded scores with ``score_dtype=torch.float32``, as 9.x does.

Unlike ``trec_eval``, the readers are strict: a docno repeated within one query (in qrels or run) is
an error, as are a NaN score and a label outside the int64 range (``trec_eval``'s ``atol`` would clamp it).

The readers by concern: :mod:`._text` reads the text line by line into dicts (:func:`read_qrels`,
:func:`read_run`; every error message is its), :mod:`._dense` turns such dicts into a :class:`TrecBatch`
(:func:`trec_to_dense`), :mod:`._load` reads whole files as columns and joins them without dicts
(:func:`load_qrels`, :func:`load_run`, :func:`read_trec`).
"""

from __future__ import annotations

from torchrank.io.trec._dense import TrecBatch, trec_to_dense
from torchrank.io.trec._load import (
    TrecFile,
    load_qrels,
    load_run,
    read_trec,
)
from torchrank.io.trec._text import (
    SAMPLE_QRELS,
    SAMPLE_RUN,
    ProgressCallback,
    read_qrels,
    read_run,
)

__all__ = [
    "SAMPLE_QRELS",
    "SAMPLE_RUN",
    "ProgressCallback",
    "TrecBatch",
    "TrecFile",
    "load_qrels",
    "load_run",
    "read_qrels",
    "read_run",
    "read_trec",
    "trec_to_dense",
]
