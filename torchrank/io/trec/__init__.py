"""TREC qrels and run files: the readers are in :mod:`torchrank.io.trec._load`; this package is their import path."""

from __future__ import annotations

# COMPRESSED_SUFFIXES, _first_duplicate and _open_compressed: torchrank.io.frames reads them here
from torchrank.io.trec._load import (  # noqa: F401
    COMPRESSED_SUFFIXES,
    SAMPLE_QRELS,
    SAMPLE_RUN,
    ProgressCallback,
    TrecBatch,
    TrecFile,
    _first_duplicate,
    _open_compressed,
    load_qrels,
    load_run,
    read_qrels,
    read_run,
    read_trec,
    trec_to_dense,
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
