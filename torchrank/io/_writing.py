"""Writing runs and results back: TREC text, CSV and parquet (:func:`write_run`, :func:`write_results`).

Public through :mod:`torchrank.io`, whose readers (:mod:`torchrank.io.frames`, :mod:`torchrank.io.trec`) these files
go back to.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ._common import COMPRESSED_SUFFIXES
from ._file import TrecFile
from .frames import _need_pyarrow, run_from_dataframe, table_format

if TYPE_CHECKING:
    import pandas as pd

    from .trec_eval import RunScores

__all__ = ["write_results", "write_run"]


def _run_rows(run: TrecFile | pd.DataFrame | Mapping[str, Mapping[str, float]]) -> tuple[list, list, np.ndarray]:
    """``(qids, docnos, scores)`` of every document of a run, in any order."""
    if isinstance(run, TrecFile):
        c = run.columns
        return [c.qids[q] for q in c.qid.tolist()], [c.docno(i) for i in range(len(c))], np.asarray(c.value)
    if isinstance(run, Mapping):
        qids = [q for q, docs in run.items() for _ in docs]
        docnos = [d for docs in run.values() for d in docs]
        return qids, docnos, np.array([s for docs in run.values() for s in docs.values()], dtype=np.float64)
    file = run_from_dataframe(run)
    return _run_rows(file)


def _trec_order(qids: list, docnos: list, scores: np.ndarray) -> np.ndarray:
    """Rows ordered by qid, then score descending, then docno descending (trec_eval's rank order)."""
    qid_codes = {q: i for i, q in enumerate(sorted(set(qids)))}
    docno_codes = {d: i for i, d in enumerate(sorted(set(docnos)))}
    q = np.fromiter((qid_codes[x] for x in qids), dtype=np.int64, count=len(qids))
    d = np.fromiter((docno_codes[x] for x in docnos), dtype=np.int64, count=len(docnos))
    return np.lexsort((-d, -scores, q))


def _check_token(value: str, what: str) -> str:
    if not value or any(ch.isspace() for ch in value):
        raise ValueError(f"a {what} written to a TREC file must be non-empty without whitespace, got {value!r}")
    return value


def write_run(
    run: TrecFile | pd.DataFrame | Mapping[str, Mapping[str, float]],
    path: str | os.PathLike[str],
    *,
    runid: str | None = None,
    format: str | None = None,
) -> None:
    """Write a run as TREC text (``qid Q0 docno rank score runid``), CSV or parquet (PyTerrier's columns).

    The format follows the file name (``.parquet``, ``.csv``, ``.tsv``; TREC text otherwise; ``.gz``, ``.bz2``,
    ``.xz`` compress) unless ``format`` (``"trec"``, ``"csv"``, ``"tsv"``, ``"parquet"``) says. TREC text is in
    trec_eval's rank order with each score written exactly (Python's shortest round-trip ``repr``), so reading
    the file back gives the same evaluation.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "run.txt")
        >>> write_run({"q1": {"d1": 0.5, "d2": 2.0}}, path, runid="bm25")
        >>> print(open(path).read(), end="")
        q1 Q0 d2 1 2.0 bm25
        q1 Q0 d1 2 0.5 bm25
    """
    qids, docnos, scores = _run_rows(run)
    fmt = format or table_format(path) or "trec"
    if fmt not in ("trec", "csv", "tsv", "parquet"):
        raise ValueError(f"format must be 'trec', 'csv', 'tsv' or 'parquet', got {fmt!r}")
    order = _trec_order(qids, docnos, scores)
    qids = [qids[i] for i in order]
    docnos = [docnos[i] for i in order]
    scores = scores[order]
    if fmt == "trec":
        tag = _check_token(runid or (run.runid if isinstance(run, TrecFile) and run.runid else "torchrank"), "runid")
        rank, previous = 0, None
        lines = []
        for q, d, s in zip(qids, docnos, scores.tolist(), strict=True):
            rank = rank + 1 if q == previous else 1
            previous = q
            lines.append(f"{_check_token(q, 'qid')} Q0 {_check_token(d, 'docno')} {rank} {s!r} {tag}\n")
        _write_text(path, "".join(lines))
        return
    _write_frame(path, fmt, {"qid": qids, "docno": docnos, "score": scores})


def _write_text(path: str | os.PathLike[str], text: str) -> None:
    data = text.encode("utf-8", errors="surrogateescape")
    name = os.fspath(path).lower()
    if name.endswith(COMPRESSED_SUFFIXES):
        import bz2
        import gzip
        import lzma

        opener = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}["." + name.rsplit(".", 1)[-1]]
        with opener(path, "wb") as f:
            f.write(data)
        return
    Path(path).write_bytes(data)


def _write_frame(path: str | os.PathLike[str], fmt: str, columns: dict[str, Sequence]) -> None:
    if fmt == "parquet":
        pa = _need_pyarrow("Writing parquet")
        import pyarrow.parquet as pq

        pq.write_table(pa.table(columns), os.fspath(path))
        return
    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t" if fmt == "tsv" else ",", lineterminator="\n")
    writer.writerow(list(columns))
    values = [v.tolist() if isinstance(v, np.ndarray) else v for v in columns.values()]
    writer.writerows(zip(*[[repr(x) if isinstance(x, float) else x for x in v] for v in values], strict=True))
    _write_text(path, out.getvalue())


def write_results(
    results: RunScores | Sequence[RunScores], path: str | os.PathLike[str], *, format: str | None = None
) -> None:
    """Write per-query results (:func:`~torchrank.io.trec_eval.score_run`'s) as trec_eval text, CSV or parquet.

    TREC text is ``trec_eval -q``'s output (each run's block in turn); CSV and parquet hold the rows ``run,
    runid, measure, qid, value``, the ``all`` rows after each measure's queries, values at full precision.

    Example:
        >>> import os, tempfile
        >>> from torchrank.io import SAMPLE_QRELS, SAMPLE_RUN
        >>> from torchrank.io.trec_eval import score_run
        >>> path = os.path.join(tempfile.mkdtemp(), "results.csv")
        >>> write_results(score_run(SAMPLE_QRELS, SAMPLE_RUN, ["map"]), path)
        >>> open(path).read().splitlines()[:2]
        ['run,runid,measure,qid,value', 'results.test,STANDARD,map,301,0.03242534480374725']
    """
    from .trec_eval import format_trec_eval

    runs = [results] if not isinstance(results, Sequence) else list(results)
    fmt = format or table_format(path) or "trec"
    if fmt == "trec":
        _write_text(path, "".join(format_trec_eval(r, per_query=True) + "\n" for r in runs))
        return
    if fmt not in ("csv", "tsv", "parquet"):
        raise ValueError(f"format must be 'trec', 'csv', 'tsv' or 'parquet', got {fmt!r}")
    rows: dict[str, list] = {"run": [], "runid": [], "measure": [], "qid": [], "value": []}
    for r in runs:
        name = os.path.basename(r.path) if r.path else ""
        summary = r.summary()
        for measure, values in r.values.items():
            per_query = list(zip(r.qids, values.tolist(), strict=True)) if r.kinds[measure] != "gm" else []
            for qid, value in [*per_query, ("all", summary[measure])]:
                for key, v in zip(rows, (name, r.runid or "", measure, qid, float(value)), strict=True):
                    rows[key].append(v)
    _write_frame(path, fmt, rows)
