"""Readers for ranking data: TREC qrels/runs (``trec_eval`` semantics), SVMlight/LETOR files and BEIR ids/qrels.

Example:
    >>> from torchrank.io import SAMPLE_QRELS, SAMPLE_RUN, read_qrels, read_run, trec_to_dense
    >>> batch = trec_to_dense(read_qrels(SAMPLE_QRELS), read_run(SAMPLE_RUN))
    >>> batch.qids, tuple(batch.preds.shape), tuple(batch.ideal_target.shape)
    (['301', '302', '303'], (3, 500), (3, 1708))
"""

from ._dataframes import from_dataframe, to_dataframe
from ._errors import TrecFormatError
from ._writing import write_results, write_run
from .beir import BeirQrels, IdMap, read_beir_qrels, read_jsonl_ids
from .frames import qrels_from_dataframe, read_table, run_from_dataframe
from .svmlight import SvmlightData, group_to_dense, read_svmlight
from .trec import (
    SAMPLE_QRELS,
    SAMPLE_RUN,
    ProgressCallback,
    TrecBatch,
    TrecFile,
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
    "BeirQrels",
    "IdMap",
    "ProgressCallback",
    "SvmlightData",
    "TrecBatch",
    "TrecFile",
    "TrecFormatError",
    "from_dataframe",
    "group_to_dense",
    "load_qrels",
    "load_run",
    "qrels_from_dataframe",
    "read_beir_qrels",
    "read_jsonl_ids",
    "read_qrels",
    "read_run",
    "read_svmlight",
    "read_table",
    "read_trec",
    "run_from_dataframe",
    "to_dataframe",
    "trec_to_dense",
    "write_results",
    "write_run",
]
