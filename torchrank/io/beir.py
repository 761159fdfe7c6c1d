"""BEIR / MTEB retrieval data as it lies on disk: the ids of ``corpus.jsonl`` and ``queries.jsonl``, and
``qrels/<split>.tsv``, as the integer ids :class:`torchrank.metrics.CorpusRetrieval` and
:func:`torchrank.functional.ids_to_dense` take.

String ids stay strings (``"00123"`` and ``"123"`` are two documents); an :class:`IdMap` numbers them ``0, 1, 2,
...`` in the order it first sees them and turns numbers back into strings. Texts are never kept: a JSON line is
searched for its ``"_id"`` key, and decoded whole only when that search is not conclusive.

Example:
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "corpus.jsonl").write_text(
    ...     '{"_id": "d1", "title": "", "text": "..."}\\n{"_id": "d2", "title": "", "text": "..."}\\n')
    >>> _ = (folder / "qrels.tsv").write_text("query-id\\tcorpus-id\\tscore\\nq1\\td2\\t1\\nq1\\td9\\t2\\n")
    >>> corpus = IdMap(read_jsonl_ids(folder / "corpus.jsonl"))
    >>> qrels = read_beir_qrels(folder / "qrels.tsv", corpus)
    >>> qrels.query_ids, qrels.relevant_ids, qrels.relevant_labels
    (['q1'], tensor([[1, 2]]), tensor([[1, 2]]))
    >>> corpus.decode(qrels.relevant_ids[0])  # d9 is judged but not in the corpus: it got id 2, past the corpus
    ['d2', 'd9']
"""

from __future__ import annotations

import codecs
import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ._errors import TrecFormatError

__all__ = ["BeirQrels", "IdMap", "read_beir_qrels", "read_jsonl_ids"]

# a JSON string value of the key "_id": in valid JSON the bytes `"_id"` followed by a colon are always a key (a
# quote inside a string is escaped), so a line with exactly one such match holds its id there
_ID = re.compile(rb'"_id"[ \t]*:[ \t]*"([^"\\\n]*(?:\\.[^"\\\n]*)*)"')
_ID_TO_LINE_END = re.compile(_ID.pattern + rb"[^\n]*\n")
_CHUNK_BYTES = 1 << 23  # whole lines per regex pass: a few MiB of text at a time, whatever the corpus size
QRELS_HEADER = ("query-id", "corpus-id", "score")


class IdMap:
    """String ids and the integers ``0 .. len - 1`` that stand for them, in first-seen order.

    Args:
        ids: Ids to number first, in order (an id seen twice keeps its first number).

    Example:
        >>> docs = IdMap(["d7", "12", "d7"])
        >>> len(docs), docs.encode(["12", "d7"])
        (2, tensor([1, 0]))
        >>> docs.encode(["x"], add=True), docs.decode(torch.tensor([2, -1]))
        (tensor([2]), ['x', None])
    """

    def __init__(self, ids: Iterable[str] = ()) -> None:
        self._index: dict[str, int] = {}
        self._ids: list[str] = []
        self.add(ids)

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, id_: object) -> bool:
        return id_ in self._index

    def __repr__(self) -> str:
        shown = ", ".join(map(repr, self._ids[:3])) + (", ..." if len(self) > 3 else "")
        return f"IdMap([{shown}], {len(self)} ids)"

    @property
    def ids(self) -> list[str]:
        """Every id, by its number (a copy)."""
        return list(self._ids)

    def add(self, ids: Iterable[str]) -> None:
        """Number the ids not seen yet, in order."""
        for id_ in ids:
            self._number(id_)

    def _number(self, id_: str) -> int:
        number = self._index.get(id_)
        if number is None:
            if not isinstance(id_, str):
                raise TypeError(f"An IdMap holds string ids, got {id_!r} ({type(id_).__name__}).")
            number = self._index[id_] = len(self._ids)
            self._ids.append(id_)
        return number

    def encode(self, ids: Iterable[str], *, add: bool = False, missing: int | None = None) -> Tensor:
        """The int64 numbers of ``ids``. An unknown id is numbered now (``add=True``), becomes ``missing`` (an int,
        e.g. the padding id -1), or raises ``KeyError`` (the default)."""
        if add:
            return torch.tensor([self._number(i) for i in ids], dtype=torch.int64)
        index = self._index
        if missing is None:
            try:
                return torch.tensor([index[i] for i in ids], dtype=torch.int64)
            except KeyError as err:
                raise KeyError(f"Id {err.args[0]!r} is not in this IdMap ({len(self)} ids).") from None
        return torch.tensor([index.get(i, missing) for i in ids], dtype=torch.int64)

    def decode(self, numbers: Tensor | Sequence[int]) -> list:
        """The ids of ``numbers`` (any shape: nested lists); a number outside ``[0, len)``, such as the padding id,
        gives None."""
        values = numbers.tolist() if isinstance(numbers, Tensor) else list(numbers)

        def one(value: object) -> object:
            if isinstance(value, list):
                return [one(v) for v in value]
            return self._ids[value] if 0 <= value < len(self._ids) else None  # type: ignore[operator]

        return [one(v) for v in values]


# ---------------------------------------------------------------------------------------------- jsonl ids


def read_jsonl_ids(path: str | os.PathLike[str]) -> list[str]:
    """The ``_id`` of each line of a BEIR ``corpus.jsonl`` or ``queries.jsonl``, in file order.

    The file is read a few MiB at a time and each line's ``"_id"`` found by one regular-expression pass per
    block; a line where that search is not conclusive (no match, or more than one) is decoded with ``json``.
    Texts are never kept. Blank lines are skipped. An id is the string as written (``"0042"`` stays ``"0042"``; a
    number in place of a string is read as its JSON text).

    Raises:
        TrecFormatError: naming the file and line: a line that is not a JSON object with an ``_id``, or an id that
            occurs twice.

    Example:
        >>> import pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "queries.jsonl"
        >>> _ = path.write_text('{"_id": "007", "text": "who"}\\n{"text": "\\\\"_id\\\\"", "_id": "caf\\\\u00e9"}\\n')
        >>> read_jsonl_ids(path)
        ['007', 'café']
    """
    ids: list[str] = []
    for block, lineno in _blocks(path):
        ids += _block_ids(path, block, lineno)
    if len(set(ids)) != len(ids):  # the lines of the first repeated id, read again only then
        first_line: dict[str, int] = {}
        for block, lineno in _blocks(path):
            for line, id_ in _careful_ids(path, block, lineno):
                seen = first_line.setdefault(id_, line)
                if seen != line:
                    raise TrecFormatError(path, line, f"each _id once (also on line {seen})", id_)
    return ids


def _blocks(path: str | os.PathLike[str]) -> Iterator[tuple[bytes, int]]:
    """Blocks of whole lines (each ending in a newline) and the number of lines before each."""
    lineno = 0
    with open(path, "rb") as file:
        rest = b""
        first = True
        while True:
            block = file.read(_CHUNK_BYTES)
            data = rest + block
            if first and data.startswith(codecs.BOM_UTF8):
                data = data[len(codecs.BOM_UTF8) :]
            first = False
            if not block:  # the last line, without its newline
                if data:
                    yield data + b"\n", lineno
                return
            end = data.rfind(b"\n") + 1
            rest = data[end:]
            if end:
                yield data[:end], lineno
                lineno += data.count(b"\n", 0, end)


def _block_ids(path: str | os.PathLike[str], block: bytes, lineno: int) -> list[str]:
    """The ids of a block of whole lines, the first of them line ``lineno + 1``.

    One regex pass finds the first ``"_id"`` key with a string value of each line (a match runs to the end of its
    line, so no line gives two). The block is clear when every line gives one and the block holds the bytes
    ``"_id"`` no more often than it has lines: in valid JSON those bytes followed by a colon are always a key, since
    a quote inside a string is escaped, so no line needs decoding. Otherwise each line is read with
    :func:`_careful_ids`.
    """
    found = _ID_TO_LINE_END.findall(block)
    if len(found) == block.count(b"\n") == block.count(b'"_id"'):
        try:
            ids = [raw.decode("utf-8") for raw in found]
            if b"\\" in b"".join(found):  # escapes: those ids decoded as JSON strings
                ids = [json.loads(b'"' + raw + b'"') if b"\\" in raw else id_ for raw, id_ in zip(found, ids,
                                                                                               strict=True)]
            return ids
        except ValueError:  # a bad escape or bad UTF-8: found, with its line, below
            pass
    return [id_ for _, id_ in _careful_ids(path, block, lineno)]


def _careful_ids(path: str | os.PathLike[str], block: bytes, lineno: int) -> Iterator[tuple[int, str]]:
    """``(line number, id)`` of each non-blank line of a block, by the regex where a line has one ``"_id"`` key,
    else by ``json``."""
    for j, line in enumerate(block.split(b"\n")[:-1]):
        if not line.strip():
            continue
        match = _ID.search(line) if line.count(b'"_id"') == 1 else None
        yield lineno + 1 + j, (_string(match.group(1), path, lineno + 1 + j) if match
                               else _decoded_id(line, path, lineno + 1 + j))


def _string(raw: bytes, path: str | os.PathLike[str], lineno: int) -> str:
    """A JSON string's content as text (escapes decoded only where there is one)."""
    try:
        return json.loads(b'"' + raw + b'"') if b"\\" in raw else raw.decode("utf-8")
    except ValueError:
        raise TrecFormatError(path, lineno, "a JSON string _id (UTF-8)", raw) from None


def _decoded_id(line: bytes, path: str | os.PathLike[str], lineno: int) -> str:
    try:
        record = json.loads(line)
    except ValueError:
        raise TrecFormatError(path, lineno, "a JSON object on each line", line[:200]) from None
    if not isinstance(record, dict) or "_id" not in record:
        raise TrecFormatError(path, lineno, 'a JSON object with an "_id" field', line[:200])
    id_ = record["_id"]
    if isinstance(id_, str):
        return id_
    if isinstance(id_, int | float) and not isinstance(id_, bool):
        return json.dumps(id_)
    raise TrecFormatError(path, lineno, "a string or number _id", id_)


# ---------------------------------------------------------------------------------------------- qrels


@dataclass
class BeirQrels:
    """A BEIR qrels split as id lists, one row per judged query.

    Attributes:
        query_ids: ``[Q]`` the queries' string ids, in order of first appearance in the file.
        relevant_ids: ``[Q, M]`` int64 numbers of each query's judged documents (in the corpus :class:`IdMap`),
            -1 as padding.
        relevant_labels: ``[Q, M]`` int64 scores of those documents (0 at padding).
    """

    query_ids: list[str]
    relevant_ids: Tensor
    relevant_labels: Tensor

    def rows(self, query_ids: Sequence[str]) -> tuple[Tensor, Tensor]:
        """``(relevant_ids, relevant_labels)`` rows for ``query_ids`` in that order (e.g. the queries a batch
        encodes); a query without judgments gets an empty (all padding) row.

        Example:
            >>> qrels = BeirQrels(["q1"], torch.tensor([[3, 5]]), torch.tensor([[1, 2]]))
            >>> qrels.rows(["q9", "q1"])
            (tensor([[-1, -1],
                    [ 3,  5]]), tensor([[0, 0],
                    [1, 2]]))
        """
        where = {q: row for row, q in enumerate(self.query_ids)}
        index = torch.tensor([where.get(q, -1) for q in query_ids], dtype=torch.int64)  # -1: the padding row
        ids = torch.cat([self.relevant_ids, self.relevant_ids.new_full((1, self.relevant_ids.shape[1]), -1)])[index]
        labels = torch.cat([self.relevant_labels, self.relevant_labels.new_zeros(1, self.relevant_labels.shape[1])])
        labels = labels[index]
        return ids, labels


def read_beir_qrels(path: str | os.PathLike[str], corpus: IdMap, *, missing: str = "add") -> BeirQrels:
    """Read a BEIR ``qrels/<split>.tsv``: ``query-id<TAB>corpus-id<TAB>score`` lines after a header line.

    The header (``query-id corpus-id score``) is read only where it is: a file without it loses no judgment (BEIR's
    own loader skips the first line whatever it holds). Scores are integers; a negative score is a judged
    non-relevant document (label 0), as trec_eval and pytrec_eval count it.

    Args:
        path: The qrels file.
        corpus: The corpus ids (from :func:`read_jsonl_ids`); the judged documents are numbered in it.
        missing: A judged document that is not in ``corpus``: ``"add"`` numbers it in ``corpus`` after the others
            (it counts in R and in the ideal ranking, as ``ids_to_dense`` counts a relevant id never retrieved,
            and no search returns it); ``"error"`` raises.

    Raises:
        TrecFormatError: naming the file and line: a line without three tab-separated fields, a score that is not
            an integer, a pair judged twice, a document not in ``corpus`` (``missing="error"``).

    Example:
        >>> import pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "test.tsv"
        >>> _ = path.write_text("query-id\\tcorpus-id\\tscore\\n1\\t10\\t1\\n2\\t10\\t0\\n1\\t7\\t2\\n")
        >>> qrels = read_beir_qrels(path, IdMap(["7", "10"]))
        >>> qrels.query_ids, qrels.relevant_ids.tolist(), qrels.relevant_labels.tolist()
        (['1', '2'], [[1, 0], [1, -1]], [[1, 2], [0, 0]])
    """
    if missing not in ("add", "error"):
        raise ValueError(f"Argument `missing` must be 'add' or 'error', got {missing!r}.")
    if not isinstance(corpus, IdMap):
        raise TypeError(f"Argument `corpus` must be an IdMap, got {type(corpus).__name__}.")
    rows: dict[str, dict[str, tuple[int, int]]] = {}  # query -> document -> (label, line)
    with open(path, "rb") as file:
        for lineno, raw in enumerate(file, 1):
            if lineno == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]
            line = raw.rstrip(b"\r\n")
            if not line.strip():
                continue
            fields = line.split(b"\t")
            if len(fields) != 3:
                raise TrecFormatError(path, lineno, "3 tab-separated fields 'query-id corpus-id score'", line)
            query, document = (_text(f.strip(), path, lineno) for f in fields[:2])
            if lineno == 1 and (query, document, fields[2].strip().decode("utf-8", "replace")) == QRELS_HEADER:
                continue
            label = _score(fields[2], path, lineno)
            judged = rows.setdefault(query, {})
            if document in judged:
                raise TrecFormatError(path, lineno, f"each corpus-id once per query (query {query!r}, also on "
                                      f"line {judged[document][1]})", line)
            if missing == "error" and document not in corpus:
                raise TrecFormatError(path, lineno, "a corpus-id of the corpus", document)
            judged[document] = (max(label, 0), lineno)
    return _qrels_tensors(rows, corpus)


def _text(raw: bytes, path: str | os.PathLike[str], lineno: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TrecFormatError(path, lineno, "UTF-8 ids", raw) from None


def _score(raw: bytes, path: str | os.PathLike[str], lineno: int) -> int:
    text = raw.strip()
    try:
        if b"_" in text:
            raise ValueError
        return int(text)
    except ValueError:
        raise TrecFormatError(path, lineno, "an integer score in field 3", raw) from None


def _qrels_tensors(rows: dict[str, dict[str, tuple[int, int]]], corpus: IdMap) -> BeirQrels:
    """The judgments laid out one row per query, left-aligned; one pass over them all (a training split holds
    hundreds of thousands of queries: no tensor per query). Documents are numbered in file order of their queries."""
    counts = torch.tensor([len(judged) for judged in rows.values()], dtype=torch.int64)
    width = int(counts.max()) if len(rows) else 0
    numbers = corpus.encode([document for judged in rows.values() for document in judged], add=True)
    flat_labels = torch.tensor([label for judged in rows.values() for label, _ in judged.values()], dtype=torch.int64)
    row = torch.repeat_interleave(torch.arange(len(rows)), counts)
    slot = torch.arange(len(row)) - (counts.cumsum(0) - counts)[row]
    ids = torch.full((len(rows), width), -1, dtype=torch.int64)
    labels = torch.zeros((len(rows), width), dtype=torch.int64)
    ids[row, slot], labels[row, slot] = numbers, flat_labels
    return BeirQrels(list(rows), ids, labels)
