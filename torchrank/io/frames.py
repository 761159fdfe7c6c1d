"""Runs and qrels as tables: pandas DataFrames, parquet and CSV files, read into a :class:`~torchrank.io.TrecFile`.

Column names default to PyTerrier's: a run has ``qid, docno, score``, qrels have ``qid, docno, label`` (each
configurable). A table becomes a :class:`~torchrank.io.TrecFile`, the columns :func:`~torchrank.io.read_trec`
joins and ranks, so a DataFrame or a parquet file is evaluated exactly as the TREC text file with the same
rows: the same ranking (score descending, then docno descending), the same checks (a NaN score, a label that
is not an integer, a docno twice in a query), errors naming the file (or ``<DataFrame>``), the row and the
column. Text columns are taken as they are stored by pyarrow (the ``parquet`` extra: ``pip install
torchrank[parquet]``) without a Python loop over rows; without pyarrow, DataFrames are read through Python
strings.

Ids (qids, docnos) are text, however the column stores them: an integer is its decimal text, and a float id
(an integer column that became float64 on the way, through a NaN or a merge) is spelt the same on every path,
so it joins an integer column or a TREC file: a whole number as its integer (``5e10`` is ``50000000000``),
any other float as Python's ``repr``; a whole-number float at or beyond 2**53 in magnitude, which may stand
for a neighbouring integer, is refused, as is an infinity. A missing id (None, NaN, ``pd.NA``, ``NaT``) is an
error in any column type. Numbers stored as text in a DataFrame are read as the TREC reader reads a field:
``" 1"`` and ``"1_0"``, which Python's ``float`` takes, are errors naming their row (a CSV's numbers may have
spaces around them, as pyarrow's CSV reader allows). Each column read must be named once.

ranx- and ir_measures-style dicts ``{qid: {docno: score}}`` and ``{qid: {docno: label}}`` need no conversion:
:func:`~torchrank.io.trec_to_dense` takes them as they are.

Example:
    >>> import pandas as pd
    >>> from torchrank.io import from_dataframe
    >>> run = pd.DataFrame({"qid": ["q1", "q1", "q2"], "docno": ["d1", "d2", "d1"], "score": [0.3, 0.9, 0.5]})
    >>> qrels = pd.DataFrame({"qid": ["q1", "q2"], "docno": ["d1", "d1"], "label": [1, 2]})
    >>> batch = from_dataframe(run, qrels)
    >>> batch.qids, batch.docnos, batch.target.tolist()
    (['q1', 'q2'], [['d2', 'd1'], ['d1']], [[0, 1], [2, 0]])
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from torchrank._extras import require

from . import _scan
from ._common import COMPRESSED_SUFFIXES, open_compressed
from ._errors import TrecFormatError
from ._file import TrecFile, first_duplicate

if TYPE_CHECKING:
    import pandas as pd

    from .trec import ProgressCallback


__all__ = [
    "QRELS_COLUMNS",
    "RUN_COLUMNS",
    "TABLE_SUFFIXES",
    "qrels_from_dataframe",
    "read_table",
    "run_from_dataframe",
    "table_format",
]

#: PyTerrier's column names of a run and of qrels (the defaults).
RUN_COLUMNS = ("qid", "docno", "score")
QRELS_COLUMNS = ("qid", "docno", "label")
#: File names read as tables rather than TREC text (a CSV may be compressed: ``runs.csv.gz``).
TABLE_SUFFIXES = (".parquet", ".pq", ".csv", ".tsv")
_DATAFRAME = "<DataFrame>"


def table_format(path: str | os.PathLike[str]) -> str | None:
    """``"parquet"``, ``"csv"`` or ``"tsv"`` for a table file name (compression suffixes aside), else None.

    Example:
        >>> table_format("run.parquet"), table_format("run.csv.gz"), table_format("run.txt.gz")
        ('parquet', 'csv', None)
    """
    name = os.fspath(path).lower()
    for suffix in COMPRESSED_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    for suffix in TABLE_SUFFIXES:
        if name.endswith(suffix):
            return "parquet" if suffix in (".parquet", ".pq") else suffix[1:]
    return None


# ----------------------------------------------------------------------------------------------------
# reading
# ----------------------------------------------------------------------------------------------------


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
    except ImportError:
        return None
    return pa


def _need_pyarrow(what: str) -> Any:
    return require("pyarrow", what)


class _Table:
    """The columns of one table as pyarrow arrays (or, without pyarrow, Python lists), and where they came from."""

    def __init__(self, source: str, columns: dict[str, Any], rows: int, first_row: int) -> None:
        self.source, self.columns, self.rows, self.first_row = source, columns, rows, first_row

    def error(self, row: int, column: str, expected: str, got: object) -> TrecFormatError:
        """An error at 0-based data row ``row``: the file's row (or line) number and the column named."""
        return TrecFormatError(self.source, row + self.first_row, f"column '{column}': {expected}", got)


def _check_unique(source: str, names: Sequence[str], columns: Sequence[object], lineno: int = 0) -> None:
    """Each column read is named once: with two ``score`` columns (``pd.concat([run, run[["score"]]],
    axis=1)``) there is no telling which one is meant, and pandas returns both as a frame. ``lineno``: the
    header's line (a CSV's 1), else 0."""
    columns = list(columns)
    repeated = [n for n in dict.fromkeys(names) if columns.count(n) > 1]
    if repeated:
        raise TrecFormatError(
            source, lineno, f"one column named {repeated[0]!r} (it names {columns.count(repeated[0])} columns)",
            list(map(str, columns)),
        )  # fmt: skip


def _frame_table(frame: pd.DataFrame, names: Sequence[str], source: str, first_row: int = 1) -> _Table:
    missing = [n for n in names if n not in frame.columns]
    if missing:
        raise TrecFormatError(
            source, 0, f"columns {list(names)} (missing {missing}; rename them or pass the column names)",
            list(map(str, frame.columns)),
        )  # fmt: skip
    _check_unique(source, names, frame.columns)
    pa = _pyarrow()

    def column(name: str) -> Any:
        if pa is not None:
            try:
                return pa.array(frame[name], from_pandas=True)
            # mixed values, or integers beyond 64 bits: Python's view finds the bad row
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
                pass
        return frame[name].tolist()

    return _Table(source, {n: column(n) for n in names}, len(frame), first_row)


def _arrow_table(table: Any, names: Sequence[str], source: str, first_row: int = 1) -> _Table:
    missing = [n for n in names if n not in table.column_names]
    if missing:
        raise TrecFormatError(source, 0, f"columns {list(names)} (missing {missing})", table.column_names)
    _check_unique(source, names, table.column_names, first_row - 1)
    return _Table(source, {n: table.column(n).combine_chunks() for n in names}, table.num_rows, first_row)


def _strings(t: _Table, name: str) -> tuple[bytes, np.ndarray, np.ndarray]:
    """A text column as ``(utf-8 bytes, start offsets, lengths)``; numbers become their decimal text."""
    values = _id_values(t, name)
    pa = _pyarrow()
    if pa is not None and isinstance(values, pa.Array):
        if not pa.types.is_large_string(values.type):
            values = values.cast(pa.large_string())
        _, offsets_buf, data_buf = values.buffers()
        offsets = np.frombuffer(offsets_buf, dtype=np.int64)[values.offset : values.offset + len(values) + 1]
        data = data_buf.to_pybytes() if data_buf is not None else b""
        return data, offsets[:-1].copy(), np.diff(offsets)
    encoded = []
    for row, v in enumerate(values):
        if _missing(v):
            raise t.error(row, name, "a value in every row", v)
        text = _float_id(t, row, name, float(v)) if isinstance(v, float | np.floating) else str(v)
        encoded.append(text.encode("utf-8", errors="surrogateescape"))
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    return b"".join(encoded), np.cumsum(lengths) - lengths, lengths


def _missing(v: object) -> bool:
    """Whether a Python value of an id column stands for a missing one: None, NaN, and also pandas' ``pd.NA``
    and ``NaT``, which ``str`` would spell ``<NA>`` and ``NaT`` and so join as ordinary ids."""
    if v is None:
        return True
    if isinstance(v, str):
        return False
    if isinstance(v, float):
        return v != v
    try:
        import pandas as pd
    except ImportError:
        return False
    missing = pd.isna(v)
    return isinstance(missing, bool | np.bool_) and bool(missing)


def _id_values(t: _Table, name: str) -> Any:
    """An id column (qid or docno) with a value in every row, float ids spelled by :func:`_float_ids`."""
    values = t.columns[name]
    pa = _pyarrow()
    if pa is None or not isinstance(values, pa.Array):
        return values
    if values.null_count:
        row = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
        raise t.error(row, name, "a value in every row", None)
    if pa.types.is_floating(values.type):
        return _float_ids(t, name, values.to_numpy(zero_copy_only=False).astype(np.float64))
    return values


# A float id at or beyond 2**53 may be one of several integers (2**53 + 1 is stored as 2**53)
_EXACT_FLOAT_IDS = 2.0**53
_FLOAT_ID_WHAT = (
    "an id that a float holds exactly (a whole number below 2**53 in magnitude, or a fraction; "
    "store larger ids as integers or text)"
)


def _float_ids(t: _Table, name: str, array: np.ndarray) -> Any:
    """A float id column as text, the same on every path: a whole number as its integer (``5e10`` and
    ``50000000000.0`` are ``50000000000``, as in an integer column or a TREC file), any other value as
    Python's shortest round-trip ``repr``. A NaN is a missing value; an infinity or a whole number whose
    float cannot tell it from its neighbours is refused rather than spelt as some other id."""
    pa = _pyarrow()
    bad = np.isnan(array)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise t.error(row, name, "a value in every row", array[row].item())
    whole = array == np.round(array)
    bad = np.isinf(array) | (whole & (np.abs(array) >= _EXACT_FLOAT_IDS))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise t.error(row, name, _FLOAT_ID_WHAT, array[row].item())
    if whole.all():
        return pa.array(array.astype(np.int64)).cast(pa.large_string())
    texts = [str(int(v)) if v.is_integer() else repr(v) for v in array.tolist()]
    return pa.array(texts, type=pa.large_string())


def _float_id(t: _Table, row: int, name: str, v: float) -> str:
    """One float id as :func:`_float_ids` spells it (the Python path for object columns)."""
    if v != v:
        raise t.error(row, name, "a value in every row", v)
    if v.is_integer() and abs(v) < _EXACT_FLOAT_IDS:
        return str(int(v))
    if v.is_integer() or math.isinf(v):
        raise t.error(row, name, _FLOAT_ID_WHAT, v)
    return repr(v)


_INT64_WHAT = "an integer relevance label within the int64 range"


def _numbers(t: _Table, name: str, integer: bool) -> np.ndarray:
    """A score (float64, no NaN) or label (int64) column."""
    values = t.columns[name]
    pa = _pyarrow()
    what = "an integer relevance label" if integer else "a numeric (non-NaN) score"
    exact = _integer_labels(t, name, values, pa) if integer else None
    if exact is not None:
        return exact
    array = None
    if pa is not None and isinstance(values, pa.Array):
        if values.null_count:
            row = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
            raise t.error(row, name, what, None)
        try:
            array = values.cast(pa.float64()).to_numpy(zero_copy_only=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            values = values.to_pylist()
    elif not any(isinstance(v, str | bytes) for v in values):  # numpy would take " 1" and "1_0" as Python does
        try:
            array = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            pass
    if array is None:
        array = _python_numbers(t, name, list(values), what)
    bad = np.isnan(array) | (np.isinf(array) | (array != np.round(array)) if integer else False)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise t.error(row, name, what, array[row].item())
    if integer:
        # beyond int64 the cast below would wrap silently; 2**63 is the first double past int64's maximum
        outside = (array >= 2.0**63) | (array < -(2.0**63))
        if outside.any():
            row = int(np.flatnonzero(outside)[0])
            raise t.error(row, name, _INT64_WHAT, array[row].item())
    return array.astype(np.int64) if integer else array


def _python_numbers(t: _Table, name: str, values: list, what: str) -> np.ndarray:
    """A number column that pyarrow or numpy could not convert, value by value, naming the first bad row.

    Text is read as a field of a TREC file is: :func:`_text_number` refuses the spaces and digit-group
    underscores that Python's ``float`` takes (``" 1"``, ``"1_0"``) and pyarrow does not, so every path
    accepts the same values and an error names the row that holds the bad one.
    """
    out = np.empty(len(values), dtype=np.float64)
    for row, v in enumerate(values):
        try:
            out[row] = _text_number(v) if isinstance(v, str | bytes) else float(v)
        except (TypeError, ValueError, OverflowError):
            raise t.error(row, name, what, v) from None
    return out


def _text_number(text: str | bytes) -> float:
    """``float`` of one text value, as the TREC reader parses a field: ASCII, no whitespace, no ``_``."""
    raw = text.encode("utf-8", errors="surrogateescape") if isinstance(text, str) else text
    if not raw.isascii() or b"_" in raw or len(raw.split()) != 1 or raw.strip() != raw:
        raise ValueError(text)
    return float(raw)


def _integer_labels(t: _Table, name: str, values: Any, pa: Any) -> np.ndarray | None:
    """An integer-typed label column as int64, exactly; None for other columns (read through float64).

    Going through float64 would round labels beyond 2**53 and cannot hold int64's maximum; a uint64 label
    beyond int64 is named by its row, as the TREC reader names a line.
    """
    if pa is None or not isinstance(values, pa.Array) or not pa.types.is_integer(values.type) or values.null_count:
        return None
    array = values.to_numpy(zero_copy_only=False)
    if array.dtype == np.uint64:
        outside = array > np.uint64(np.iinfo(np.int64).max)
        if outside.any():
            row = int(np.flatnonzero(outside)[0])
            raise t.error(row, name, _INT64_WHAT, int(array[row]))
    return array.astype(np.int64)


def _query_ids(t: _Table, name: str) -> tuple[list[str], np.ndarray]:
    """Distinct qids in first-appearance order and each row's index into them."""
    pa = _pyarrow()
    values = _id_values(t, name)
    if pa is not None and isinstance(values, pa.Array):
        # a hash table in C; its dictionary lists the values in order of first appearance
        encoded = values.cast(pa.large_string()).dictionary_encode()
        return encoded.dictionary.to_pylist(), encoded.indices.to_numpy(zero_copy_only=False).astype(np.int32)
    data, start, length = _strings(t, name)
    if not len(start):
        return [], np.zeros(0, dtype=np.int32)
    # qids are few: the distinct byte strings of the rows, numbered in order of first appearance
    width = int(length.max()) if len(length) else 0
    buf = np.frombuffer(data + bytes(width), dtype=np.uint8)
    fixed = np.zeros((len(start), width), dtype=np.uint8)
    for i in range(width):  # a loop over characters, never over rows
        inside = length > i
        fixed[inside, i] = buf[start[inside] + i]
    rows = fixed.view(np.dtype((np.void, width))).ravel() if width else np.zeros(len(start), dtype="V1")
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    qids = [data[start[i] : start[i] + length[i]].decode("utf-8", errors="surrogateescape") for i in first[order]]
    return qids, rank[inverse.ravel()].astype(np.int32)


def _columns(t: _Table, names: Sequence[str], kind: str, runid: str | None) -> _scan.Columns:
    qid_name, docno_name, value_name = names
    qids, qid = _query_ids(t, qid_name)
    text, start, length = _strings(t, docno_name)
    if (length == 0).any():
        raise t.error(int(np.flatnonzero(length == 0)[0]), docno_name, "a non-empty docno", "")
    value = _numbers(t, value_name, integer=kind == "qrels")
    data = bytearray(len(text) + _scan.PAD)
    data[: len(text)] = text
    u64 = np.ndarray((len(data) - 8,), dtype="<u8", buffer=data, strides=(1,))
    key = _scan._words(u64, start, length) if len(start) else np.zeros((0, 1), np.uint64)
    del u64
    tag = None if kind == "qrels" else (runid or "torchrank").encode("utf-8", errors="surrogateescape")
    columns = _scan.Columns(data, qids, qid, key, start, length.astype(np.int32), _scan.mix(key), value, tag)
    duplicate = first_duplicate(columns)
    if duplicate is not None:
        raise t.error(duplicate, docno_name, f"each docno at most once per query (qid {qids[qid[duplicate]]})",
                      columns.docno(duplicate))  # fmt: skip
    if not len(columns):
        raise TrecFormatError(t.source, 0, f"at least one {kind} row", "an empty table")
    return columns


def _file(t: _Table, names: Sequence[str], kind: str, runid: str | None) -> TrecFile:
    return TrecFile(t.source, kind, _columns(t, names, kind, runid))


def run_from_dataframe(
    frame: pd.DataFrame,
    *,
    qid: str = "qid",
    docno: str = "docno",
    score: str = "score",
    runid: str | None = None,
    name: str = _DATAFRAME,
) -> TrecFile:
    """A run as a :class:`~torchrank.io.TrecFile` from a DataFrame with a query id, docno and score column.

    Other columns (PyTerrier's ``rank``, ``query``, ...) are ignored; ranks come from the scores, as in trec_eval.
    ``runid`` is the run's tag (trec_eval's ``runid``); ``name`` stands for the file in error messages.

    Example:
        >>> import pandas as pd
        >>> run = run_from_dataframe(pd.DataFrame({"qid": [1, 1], "docno": ["a", "b"], "score": [2.0, 1.0]}))
        >>> run.qids, len(run), run.runid
        (['1'], 2, 'torchrank')
    """
    return _file(_frame_table(frame, (qid, docno, score), name), (qid, docno, score), "run", runid)


def qrels_from_dataframe(
    frame: pd.DataFrame, *, qid: str = "qid", docno: str = "docno", label: str = "label", name: str = _DATAFRAME
) -> TrecFile:
    """Qrels as a :class:`~torchrank.io.TrecFile` from a DataFrame with a query id, docno and integer label column.

    Example:
        >>> import pandas as pd
        >>> qrels = qrels_from_dataframe(pd.DataFrame({"qid": ["q1"], "docno": ["a"], "label": [2]}))
        >>> qrels.qids, len(qrels)
        (['q1'], 1)
    """
    return _file(_frame_table(frame, (qid, docno, label), name), (qid, docno, label), "qrels", None)


def read_table(
    path: str | os.PathLike[str],
    kind: str,
    *,
    columns: Sequence[str] | None = None,
    runid: str | None = None,
    progress: ProgressCallback | None = None,
) -> TrecFile:
    """A parquet or CSV/TSV file (with a header row) as a run or qrels :class:`~torchrank.io.TrecFile`.

    Args:
        path: ``.parquet``/``.pq`` (pyarrow), ``.csv`` or ``.tsv`` (compressed ones too: ``.csv.gz``).
        kind: ``"run"`` or ``"qrels"``.
        columns: The names of the qid, docno and score (or label) columns; PyTerrier's by default.
        runid: The run's tag; default: the file name without its extensions.
        progress: Called with byte counts as the file is read.

    Errors name the file, the row (parquet: 1-based data row; CSV: line number, the header being line 1) and
    the column.
    """
    if kind not in ("run", "qrels"):
        raise ValueError(f"kind must be 'run' or 'qrels', got {kind!r}")
    names = tuple(columns) if columns is not None else (RUN_COLUMNS if kind == "run" else QRELS_COLUMNS)
    if len(names) != 3:
        raise ValueError(f"columns must name 3 columns (qid, docno, {'score' if kind == 'run' else 'label'})")
    fmt = table_format(path)
    source = os.fspath(path)
    if fmt == "parquet":
        _need_pyarrow("Reading parquet")
        import pyarrow.parquet as pq

        try:
            table = _arrow_table(pq.read_table(source, columns=list(names)), names, source)
        except (KeyError, ValueError) as error:  # pyarrow's message for a missing column
            if isinstance(error, TrecFormatError):
                raise
            schema = pq.read_schema(source)
            _check_unique(source, names, schema.names)
            raise TrecFormatError(source, 0, f"columns {list(names)}", schema.names) from None
    elif fmt in ("csv", "tsv"):
        table = _csv_table(source, names, "\t" if fmt == "tsv" else ",")
    else:
        raise ValueError(f"{source}: not a table file (expected one of {TABLE_SUFFIXES}, possibly compressed)")
    if progress is not None:
        progress(2 * os.path.getsize(source))
    runid = runid if runid is not None else Path(source).name.split(".")[0]
    return _file(table, names, kind, runid)


def _csv_table(source: str, names: Sequence[str], delimiter: str) -> _Table:
    pa = _pyarrow()
    if pa is not None:
        import pyarrow.csv as pacsv

        f = open_compressed(source)
        # every column as text first: docnos such as 007 keep their zeros; numbers are parsed by _numbers
        options = pacsv.ConvertOptions(column_types={n: pa.large_string() for n in names[:2]})
        try:
            table = pacsv.read_csv(
                f if f is not None else source, parse_options=pacsv.ParseOptions(delimiter=delimiter),
                convert_options=options,
            )  # fmt: skip
        except pa.ArrowInvalid as error:
            raise TrecFormatError(source, 0, "a well-formed CSV file with a header row", str(error)) from None
        finally:
            if f is not None:
                f.close()
        return _arrow_table(table, names, source, first_row=2)
    f = open_compressed(source)
    raw = f.read() if f is not None else Path(source).read_bytes()
    reader = csv.reader(io.StringIO(raw.decode("utf-8", errors="surrogateescape")), delimiter=delimiter)
    header = next(reader, [])
    missing = [n for n in names if n not in header]
    if missing:
        raise TrecFormatError(source, 1, f"a header row naming columns {list(names)} (missing {missing})", header)
    _check_unique(source, names, header, 1)
    index = [header.index(n) for n in names]
    rows = list(reader)
    for lineno, row in enumerate(rows, 2):
        if len(row) != len(header):
            raise TrecFormatError(source, lineno, f"{len(header)} fields, as the header", row)
    columns = {n: [row[i] for row in rows] for n, i in zip(names, index, strict=True)}
    # pyarrow's CSV reader takes " 1" as the number 1 (it trims spaces and tabs around numbers); so does this one
    columns[names[2]] = [v.strip(" \t") for v in columns[names[2]]]
    return _Table(source, columns, len(rows), 2)
