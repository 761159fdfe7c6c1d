"""Reader for SVMlight / LETOR learning-to-rank files and per-query packing into padded tensors.

A data line reads ``label [qid:Q] idx:val idx:val ... [# comment]`` with 1-based feature indices
(feature ``idx`` lands in column ``idx - 1``). Queries come either from the ``qid:`` fields (LETOR,
Microsoft MSLR, Yahoo) or from a LightGBM-style group file (``.query``: one group size per line, the
number of consecutive rows of each query).

Every feature token is exactly ``index:value``: one colon, a positive integer on its left and a number on
its right, as sklearn's ``load_svmlight_file`` requires. A token such as ``1:2:3`` is an error naming its
file and line, never re-split into other features.

The result is dense, so its width is what one token says: without ``n_features`` the largest index sets
it, and an index above :data:`MAX_INFERRED_FEATURES` is refused rather than allocating every row that
wide (one stray ``1000000000:1`` would otherwise ask for gigabytes); ``n_features`` states the width
and lifts the limit.
"""

from __future__ import annotations

import operator
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ._common import read_lines
from ._errors import TrecFormatError

__all__ = ["MAX_INFERRED_FEATURES", "SvmlightData", "group_to_dense", "read_svmlight"]

_FEATURE = "an 'index:value' feature with a positive integer index and a numeric value"

#: The widest feature matrix :func:`read_svmlight` infers from the largest index when ``n_features`` is not
#: given. Ranking feature sets have hundreds of columns (LETOR 4.0 46, MSLR 136, Istella 220, Yahoo 700); an
#: index beyond this is a stray or hashed feature, and as the matrix is dense it would make every row that
#: wide. A fixed width, not a memory budget, so that a file reads (or not) whatever its number of rows.
MAX_INFERRED_FEATURES = 2**16


@dataclass(frozen=True, eq=False)
class SvmlightData:
    """Rows of an SVMlight / LETOR file.

    Attributes:
        features: ``[num_docs, F]`` float32 dense feature matrix (absent features are 0).
        labels: ``[num_docs]`` float32 relevance labels.
        qid: ``[num_docs]`` int64 query index in ``0..Q-1``, numbered in order of first appearance.
        query_ids: ``[Q]`` int64: the file's own ``qid:`` value of each query index (``query_ids[qid]`` per row),
            so results join back to the file; ``0..Q-1`` for a group file, which names no query.
        docids: The ``docid = X`` of each row's comment (LETOR 4.0 writes ``#docid = GX008-... inc = 1``), or
            None when no line has one; a row without one reads ``""``.
    """

    features: Tensor
    labels: Tensor
    qid: Tensor
    query_ids: Tensor | None = None
    docids: list[str] | None = None


# LETOR 4.0's comments: "#docid = GX000-00-0000000 inc = 1 prob = 0.0246"
_DOCID = re.compile(rb"docid\s*=\s*(\S+)")


def _docids(comments: list[bytes | None]) -> list[str] | None:
    """Each row's ``docid = X`` from its comment; None when no row has one."""
    found = [None if c is None else _DOCID.search(c) for c in comments]
    if not any(found):
        return None
    return ["" if m is None else m.group(1).decode("utf-8", "replace") for m in found]


def _strict_float(tok: bytes) -> float:
    """``float`` without Python's extensions to C syntax (digit-group underscores)."""
    if b"_" in tok:
        raise ValueError(tok)
    return float(tok)


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _strict_int(tok: bytes) -> int:
    """``int`` without Python's extensions to C syntax (digit-group underscores), within int64: qids and
    feature indices become int64 tensors, and a bigger value would fail there without naming its line."""
    if b"_" in tok:
        raise ValueError(tok)
    value = int(tok)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(tok)
    return value


def _convert(
    tokens: Sequence[bytes],
    conv: Callable[[bytes], float],
    linenos: Sequence[int],
    path: str | os.PathLike[str],
    expected: str,
) -> list:
    """``list(map(conv, tokens))``; on failure find the first bad token and report its line."""
    try:
        return list(map(conv, tokens))
    except ValueError:
        pass
    for tok, lineno in zip(tokens, linenos, strict=True):
        try:
            conv(tok)
        except ValueError:
            raise TrecFormatError(path, lineno, expected, tok) from None
    raise AssertionError("unreachable")  # pragma: no cover


def _check_n_features(n_features: object) -> int | None:
    """``n_features`` as an int; a float (even ``2.0``), a bool or a negative count is a ValueError, not a
    TypeError from deep inside ``torch.zeros``."""
    if n_features is None:
        return None
    try:
        value = None if isinstance(n_features, bool) else operator.index(n_features)
    except TypeError:
        value = None
    if value is None or value < 0:
        raise ValueError(f"n_features must be a non-negative int or None, got {n_features!r}")
    return value


def _read_groups(group_file: str | os.PathLike[str]) -> list[int]:
    sizes: list[int] = []
    for lineno, line in enumerate(read_lines(group_file), 1):
        tok = line.strip()
        if not tok:
            continue
        try:
            size = int(tok)
        except ValueError:
            size = 0
        if size < 1 or b"_" in tok:
            raise TrecFormatError(group_file, lineno, "a positive integer group size", line)
        sizes.append(size)
    if not sizes:
        raise TrecFormatError(group_file, 0, "at least one group size", b"")
    return sizes


def _pair_pieces(blob: bytes, n_tokens: int) -> list[bytes] | None:
    """The ``index, value, index, value, ...`` pieces of the space-joined feature tokens ``blob``, or None
    unless it is exactly ``n_tokens`` tokens of ``a:b`` with both sides non-empty.

    Counting colons in the whole blob is not enough: ``1:2:3 4`` has two colons for two tokens and splits
    into four pieces, as ``1:2 3:4`` would. Here the colons and spaces, in order, must alternate exactly
    ``: : ... :`` (one colon inside each token), and splitting on both must give two pieces per token.
    Both are C-speed passes over the blob.
    """
    separators = blob.translate(None, _NOT_SEPARATOR)
    if separators != b": " * (n_tokens - 1) + b":" * (n_tokens > 0):
        return None
    pieces = blob.replace(b":", b" ").split()
    return pieces if len(pieces) == 2 * n_tokens else None


_NOT_SEPARATOR = bytes(b for b in range(256) if b not in b": ")


def _features(tokens: list[bytes], tok_line: Tensor, path: str | os.PathLike[str]) -> tuple[Tensor, Tensor]:
    """The ``index:value`` tokens as int64 indices and float64 values; the first malformed one, by line."""
    blob = b" ".join(tokens)
    pieces = None if b"_" in blob else _pair_pieces(blob, len(tokens))
    ok = pieces is not None
    if pieces is not None:
        try:
            idx_list = list(map(int, pieces[0::2]))
            val_list = list(map(float, pieces[1::2]))
        except ValueError:
            ok = False
        # an index beyond int64 (or below 1): the token-by-token path below names its line
        ok = ok and (not idx_list or (1 <= min(idx_list) and max(idx_list) <= _INT64_MAX))
    if not ok:
        for tok, lineno in zip(tokens, tok_line.tolist(), strict=True):
            if not _is_feature(tok):
                raise TrecFormatError(path, lineno, _FEATURE, tok)
        raise AssertionError("unreachable")  # pragma: no cover
    return torch.tensor(idx_list, dtype=torch.int64), torch.tensor(val_list, dtype=torch.float64)


def _is_feature(tok: bytes) -> bool:
    """Whether one token is ``index:value`` with exactly one colon, a positive int64 index and a number."""
    if tok.count(b":") != 1:
        return False
    i, _, v = tok.partition(b":")
    try:
        _strict_float(v)
        return _strict_int(i) >= 1
    except ValueError:
        return False


def _width(
    idx: Tensor,
    n_features: int | None,
    num_docs: int,
    tok_line: Tensor,
    tokens: list[bytes],
    path: str | os.PathLike[str],
) -> int:
    """The number of feature columns: ``n_features``, or the largest index up to ``MAX_INFERRED_FEATURES``."""
    max_idx = int(idx.max()) if idx.numel() else 0
    if n_features is None and max_idx > MAX_INFERRED_FEATURES:
        j = int(torch.argmax(idx))
        gib = max_idx * num_docs * 4 / 2**30
        raise TrecFormatError(
            path,
            int(tok_line[j]),
            f"a feature index <= {MAX_INFERRED_FEATURES} when n_features is not given (this one needs a "
            f"dense width of {max_idx} columns, {gib:.3g} GiB of float32 for the file's {num_docs} rows; "
            f"pass n_features={max_idx} to read it anyway)",
            tokens[j],
        )
    width = max_idx if n_features is None else n_features
    if max_idx > width:
        j = int(torch.nonzero(idx > width)[0])
        raise TrecFormatError(path, int(tok_line[j]), f"a feature index <= n_features={width}", tokens[j])
    return width


def _first_repeat(row: Tensor, idx: Tensor) -> int | None:
    """The first row listing an index twice, or None. Sorts the ``(row, index)`` pairs without folding them
    into one ``row * width + index`` key, which overflows int64 for a huge ``n_features``."""
    if idx.numel() < 2:
        return None
    order = torch.argsort(idx, stable=True)
    order = order[torch.argsort(row[order], stable=True)]
    r, i = row[order], idx[order]
    dup = torch.nonzero((r[1:] == r[:-1]) & (i[1:] == i[:-1]))
    return int(r[int(dup[0])]) if dup.numel() else None


def read_svmlight(
    path: str | os.PathLike[str],
    *,
    n_features: int | None = None,
    group_file: str | os.PathLike[str] | None = None,
) -> SvmlightData:
    """Read an SVMlight / LETOR ranking file into dense tensors.

    Everything from a ``#`` to the end of its line is a comment; blank lines are skipped. Feature values
    are parsed as doubles and stored as float32; within a line each index may occur once (in any order).

    Args:
        path: The data file.
        n_features: Number of feature columns ``F``; defaults to the largest index seen, up to
            :data:`MAX_INFERRED_FEATURES`. An index above it is an error.
        group_file: LightGBM-style query file (one group size per line) for data without ``qid:``
            fields. Giving it for data that has ``qid:`` fields is an error.

    Returns:
        A :class:`SvmlightData`; pack it per query with :func:`group_to_dense`.

    Raises:
        TrecFormatError: A malformed label, ``qid:`` or feature; a repeated index within a line; an
            index above ``n_features`` (or, without it, above :data:`MAX_INFERRED_FEATURES`); ``qid:`` on
            some lines only; neither ``qid:`` fields nor a group file (or both); group sizes that do not
            add up to the number of rows; an empty file.
        ValueError: ``n_features`` is not a non-negative int.

    Example:
        >>> import os, tempfile
        >>> text = "2 qid:10 1:0.5 3:1 # doc A\\n0 qid:10 2:0.25\\n1 qid:7 3:2\\n"
        >>> with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        ...     _ = f.write(text)
        >>> data = read_svmlight(f.name)
        >>> data.features
        tensor([[0.5000, 0.0000, 1.0000],
                [0.0000, 0.2500, 0.0000],
                [0.0000, 0.0000, 2.0000]])
        >>> data.labels, data.qid
        (tensor([2., 0., 1.]), tensor([0, 0, 1]))
        >>> data.query_ids[data.qid]  # the file's own qids, row by row
        tensor([10, 10,  7])
        >>> os.remove(f.name)
    """
    n_features = _check_n_features(n_features)
    lines = read_lines(path)
    linenos: list[int] = []
    label_tokens: list[bytes] = []
    qid_tokens: list[bytes | None] = []
    feat_tokens: list[bytes] = []
    counts: list[int] = []
    comments: list[bytes | None] = []
    for lineno, line in enumerate(lines, 1):
        hash_at = line.find(b"#")
        parts = (line if hash_at < 0 else line[:hash_at]).split()
        if not parts:
            continue
        linenos.append(lineno)
        comments.append(None if hash_at < 0 else line[hash_at + 1 :])
        label_tokens.append(parts[0])
        if len(parts) > 1 and parts[1].startswith(b"qid:"):
            qid_tokens.append(parts[1][4:])
            feats = parts[2:]
        else:
            qid_tokens.append(None)
            feats = parts[1:]
        feat_tokens += feats
        counts.append(len(feats))
    num_docs = len(linenos)
    if not num_docs:
        raise TrecFormatError(path, 0, "at least one 'label [qid:Q] idx:val ...' line", b"\n".join(lines[:3]))

    def line_of(i: int) -> bytes:
        return lines[linenos[i] - 1]

    labels = torch.tensor(
        _convert(label_tokens, _strict_float, linenos, path, "a numeric label"), dtype=torch.float32
    )

    # Queries: from qid: fields or from the group file, never both, never neither.
    has_qid = [t is not None for t in qid_tokens]
    if any(has_qid) and not all(has_qid):
        first = has_qid[0]
        i = has_qid.index(not first)
        what = (
            "a 'qid:' field like the first data line" if first else "no 'qid:' field like the first data line"
        )
        raise TrecFormatError(path, linenos[i], what, line_of(i))
    if has_qid[0]:
        if group_file is not None:
            raise TrecFormatError(
                path,
                linenos[0],
                f"no 'qid:' field since group_file={os.fspath(group_file)!r} is given",
                line_of(0),
            )
        raw = torch.tensor(
            _convert(qid_tokens, _strict_int, linenos, path, "an integer 'qid:' value"), dtype=torch.int64
        )
        uniq, inv = torch.unique(raw, return_inverse=True)
        first_seen = torch.full((uniq.numel(),), num_docs, dtype=torch.int64)
        first_seen.scatter_reduce_(0, inv, torch.arange(num_docs), reduce="amin")
        renumber = torch.empty_like(first_seen)
        renumber[torch.argsort(first_seen)] = torch.arange(uniq.numel())
        qid = renumber[inv]
        query_ids = torch.empty_like(uniq)
        query_ids[renumber] = uniq
    elif group_file is not None:
        sizes = _read_groups(group_file)
        if sum(sizes) != num_docs:
            raise TrecFormatError(
                group_file,
                0,
                f"group sizes adding up to the {num_docs} rows of {os.fspath(path)}",
                f"{len(sizes)} groups adding up to {sum(sizes)}",
            )
        qid = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes, dtype=torch.int64))
        query_ids = torch.arange(len(sizes))
    else:
        raise TrecFormatError(path, linenos[0], "a 'qid:' field (or a group_file argument)", line_of(0))

    # Features, converted in bulk; the slow per-token path only runs to locate an error.
    count_t = torch.tensor(counts, dtype=torch.int64)
    tok_line = torch.repeat_interleave(torch.tensor(linenos, dtype=torch.int64), count_t)
    idx, vals = _features(feat_tokens, tok_line, path)
    width = _width(idx, n_features, num_docs, tok_line, feat_tokens, path)
    row = torch.repeat_interleave(torch.arange(num_docs), count_t)
    r = _first_repeat(row, idx)
    if r is not None:
        raise TrecFormatError(path, linenos[r], "each feature index at most once per line", line_of(r))
    features = torch.zeros((num_docs, width), dtype=torch.float32)
    features[row, idx - 1] = vals.to(torch.float32)
    return SvmlightData(features=features, labels=labels, qid=qid, query_ids=query_ids, docids=_docids(comments))


def group_to_dense(values: Tensor, labels: Tensor, qid: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Pack per-row data into padded per-query tensors.

    Rows are grouped by ``qid`` (queries in ascending ``qid`` order, i.e. order of first appearance for
    :func:`read_svmlight` output); within a query the rows keep their original order. Fully vectorised
    and device-agnostic.

    Args:
        values: ``[D, ...]`` per-row values, e.g. features ``[D, F]`` or scores ``[D]``.
        labels: ``[D]`` per-row labels.
        qid: ``[D]`` integer query id of each row (need not be contiguous or sorted).

    Returns:
        ``(x, y, mask)``: ``x`` of shape ``[Q, N, ...]``, ``y`` ``[Q, N]`` and a bool ``mask`` ``[Q, N]``
        that is True for real rows; padded entries are 0. ``N`` is the largest query size.

    Example:
        >>> qid = torch.tensor([5, 5, 2, 5])
        >>> x, y, mask = group_to_dense(torch.tensor([0.1, 0.2, 0.3, 0.4]), torch.tensor([1, 0, 2, 1]), qid)
        >>> x
        tensor([[0.3000, 0.0000, 0.0000],
                [0.1000, 0.2000, 0.4000]])
        >>> y
        tensor([[2, 0, 0],
                [1, 0, 1]])
        >>> mask
        tensor([[ True, False, False],
                [ True,  True,  True]])
    """
    if qid.ndim != 1 or labels.shape != qid.shape or values.ndim < 1 or values.shape[0] != qid.shape[0]:
        raise ValueError(
            "expected qid [D], labels [D] and values [D, ...], got shapes "
            f"{tuple(qid.shape)}, {tuple(labels.shape)}, {tuple(values.shape)}"
        )
    uniq, inv = torch.unique(qid, return_inverse=True)
    num_q, num_docs = uniq.numel(), qid.numel()
    counts = torch.bincount(inv, minlength=num_q)
    width = int(counts.max()) if num_docs else 0
    order = torch.argsort(inv, stable=True)
    row = inv[order]
    col = torch.arange(num_docs, device=qid.device) - (torch.cumsum(counts, 0) - counts)[row]
    x = values.new_zeros((num_q, width, *values.shape[1:]))
    x[row, col] = values[order]
    y = labels.new_zeros((num_q, width))
    y[row, col] = labels[order]
    mask = torch.zeros((num_q, width), dtype=torch.bool, device=qid.device)
    mask[row, col] = True
    return x, y, mask
