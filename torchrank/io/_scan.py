"""Vectorised scanning of TREC qrels and run files with numpy: no Python loop over lines.

A file is read into memory once and cut into chunks of whole lines; each chunk is tokenised with a few
array passes (whitespace mask, token starts and ends, line ends). Only the fields an evaluation needs are
kept, as columns: the query of each line (an index into the distinct qids), the docno as zero-padded
8-byte words (exact: equal docnos have equal words), and the score (run) or the label (qrels).

The scan decides only what it can decide exactly. Whenever a chunk holds anything unusual (a malformed
line, a bad number, a lone carriage return, a control character, a very long token) the callers fall back
to the careful line-by-line readers of :mod:`torchrank.io.trec`, which own every error message, so errors
read the same whichever path found them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["Columns", "Fallback", "LineError", "scan"]

CHUNK_BYTES = 1 << 23  # 8 MiB per vectorised pass keeps the temporaries cache-friendly
PAD = 4096  # zero bytes after the text, so 8-byte reads past any token stay in bounds
_HASH, _NEWLINE, _CR, _UNDERSCORE, _SPACE = 35, 10, 13, 95, 32
_MASKS = np.array([(1 << (8 * r)) - 1 for r in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
_ONES = np.uint64(0x0101010101010101)
_HIGHS = np.uint64(0x8080808080808080)
_ZEROS = np.uint64(0x3030303030303030)  # "00000000"
_DOTS = np.uint64(0x1E1E1E1E1E1E1E1E)  # "." ^ "0" in every byte
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_ABOVE9 = np.uint64(0x7676767676767676)  # 127 - 9 in every byte
_POW10 = np.array([10**i for i in range(20)], dtype=np.uint64)
_POW10F = np.array([10.0**i for i in range(20)], dtype=np.float64)
_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))

Progress = Callable[[int], None]


class Fallback(Exception):
    """The vectorised scan cannot decide this file: read it line by line instead."""


class LineError(Exception):
    """A data line the scan rejects; ``offset`` is the byte offset of the line's first byte."""

    def __init__(self, offset: int) -> None:
        super().__init__(offset)
        self.offset = offset


@dataclass
class Columns:
    """The data lines of a qrels or run file as columns (``L`` data lines, in file order).

    Attributes:
        data: The file's bytes followed by ``PAD`` zero bytes (docnos are decoded from it on demand).
        qids: Distinct qids in first-appearance order.
        qid: ``[L]`` int64 index into ``qids``.
        key: ``[L, W]`` uint64 docno bytes as little-endian 8-byte words, zero padded.
        doc_start: ``[L]`` int64 byte offset of each docno (its line starts before it, on the same line).
        doc_len: ``[L]`` int32 length of each docno.
        doc_hash: ``[L]`` uint64 hash of each docno's bytes (:func:`mix` of ``key``).
        value: ``[L]`` float64 scores (run; the parsed doubles, rounded to float32 only when ranked) or
            int64 labels (qrels).
        tag: The run tag (sixth field) of the last data line (trec_eval's runid), or None.
    """

    data: bytearray
    qids: list[str]
    qid: np.ndarray
    key: np.ndarray
    doc_start: np.ndarray
    doc_len: np.ndarray
    doc_hash: np.ndarray
    value: np.ndarray
    tag: bytes | None

    def __len__(self) -> int:
        return int(self.qid.shape[0])

    def docno(self, i: int) -> str:
        """Docno of data line ``i``."""
        start = int(self.doc_start[i])
        return decode(bytes(self.data[start : start + int(self.doc_len[i])]))


def decode(raw: bytes) -> str:
    """Decode an identifier as :func:`torchrank.io._common.decode` does."""
    return raw.decode("utf-8", errors="surrogateescape")


def read_padded(path: str, progress: Progress | None = None) -> tuple[bytearray, int]:
    """The file's bytes plus ``PAD`` zero bytes, and the offset of the text (3 after a UTF-8 BOM)."""
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        f.seek(0)
        data = bytearray(size + PAD)
        view = memoryview(data)
        done = 0
        while done < size:  # in blocks, so a progress bar can move while a large file loads
            n = f.readinto(view[done : min(size, done + (CHUNK_BYTES << 2))])
            if not n:
                break
            done += n
            if progress is not None:
                progress(n)
        view.release()
    del data[done + PAD :]
    return data, 3 if data.startswith(b"\xef\xbb\xbf") else 0


def mix(words: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row of ``words`` ``[L, W]`` (splitmix64 rounds).

    Zero words are skipped, so the zero padding of a wider column does not change a docno's hash.
    """
    h = np.zeros(words.shape[0], dtype=np.uint64)
    for i in range(words.shape[1]):
        word = words[:, i]
        g = h ^ word
        g ^= g >> np.uint64(31)
        g *= _MIX[1]
        g ^= g >> np.uint64(29)
        g *= _MIX[2]
        h = g if i == 0 else np.where(word != 0, g, h)
    return h


def combine(doc_hash: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Hash of (query number, docno) pairs from :func:`mix` hashes of the docnos."""
    h = doc_hash ^ (query.astype(np.uint64) * _MIX[0])
    h ^= h >> np.uint64(32)
    h *= _MIX[1]
    return h ^ (h >> np.uint64(29))


def scan(data: bytearray, begin: int, fields: int, value_field: int, progress: Progress | None = None) -> Columns:
    """Scan ``data[begin:]`` (text followed by ``PAD`` zero bytes) into :class:`Columns`.

    Args:
        data: From :func:`read_padded`.
        begin: Offset of the text (after a byte-order mark).
        fields: 4 for qrels (exactly four fields), 6 for runs (at least six).
        value_field: Index of the value field: 3 (qrels label, int) or 4 (run score, float).
        progress: Called with the number of bytes scanned after each chunk.

    Raises:
        LineError: A data line the careful reader must look at (the offset of its first byte).
        Fallback: Something only the careful reader decides (control characters, lone ``\\r``, ...).
    """
    size = len(data) - PAD
    u8 = np.frombuffer(data, dtype=np.uint8)
    # element p is the 8 bytes starting at byte p (unaligned reads; numpy allows any byte stride)
    u64 = np.ndarray((len(data) - 8,), dtype="<u8", buffer=data, strides=(1,))
    qid_index: dict[bytes, int] = {}
    out = _Output(data.count(b"\n", begin, size) + 1, fields == 6)
    tag = None
    start = begin
    while start < size:
        stop = data.find(b"\n", min(start + CHUNK_BYTES, size) - 1, size)
        stop = size if stop < 0 else stop + 1
        chunk = _scan_chunk(data, u8, u64, start, stop, fields, value_field, qid_index)
        if chunk is not None:
            if fields == 6 and chunk[-1] is not None:  # trec_eval's runid is the last data line's tag
                tag = chunk[-1]
            out.add(chunk[:-1])
        if progress is not None:
            progress(stop - start)
        start = stop
    return out.columns(data, [decode(q) for q in qid_index], tag)


class _Output:
    """Columns filled chunk by chunk into arrays sized for every line of the file (no concatenation)."""

    def __init__(self, capacity: int, is_run: bool) -> None:
        self.n = 0
        self.qid = np.empty(capacity, dtype=np.int32)
        self.doc_start = np.empty(capacity, dtype=np.int64)
        self.doc_len = np.empty(capacity, dtype=np.int32)
        self.doc_hash = np.empty(capacity, dtype=np.uint64)
        self.value = np.empty(capacity, dtype=np.float64 if is_run else np.int64)
        self.keys: list[np.ndarray] = []

    def add(self, chunk: tuple[np.ndarray, ...]) -> None:
        qid, key, doc_start, doc_len, doc_hash, value = chunk
        end = self.n + len(qid)
        self.qid[self.n : end] = qid
        self.doc_start[self.n : end] = doc_start
        self.doc_len[self.n : end] = doc_len
        self.doc_hash[self.n : end] = doc_hash
        self.value[self.n : end] = value
        self.keys.append(key)
        self.n = end

    def columns(self, data: bytearray, qids: list[str], tag: bytes | None) -> Columns:
        n = self.n
        width = max((k.shape[1] for k in self.keys), default=1)
        if len(self.keys) == 1:
            key = self.keys[0]
        else:
            key = np.zeros((n, width), dtype=np.uint64)
            row = 0
            for k in self.keys:
                key[row : row + len(k), : k.shape[1]] = k
                row += len(k)
        return Columns(
            data,
            qids,
            self.qid[:n],
            key.reshape(n, width),
            self.doc_start[:n],
            self.doc_len[:n],
            self.doc_hash[:n],
            self.value[:n],
            tag,
        )


def _scan_chunk(
    data: bytearray,
    u8: np.ndarray,
    u64: np.ndarray,
    start: int,
    stop: int,
    fields: int,
    value_field: int,
    qid_index: dict[bytes, int],
) -> tuple | None:
    """Columns of the data lines of ``data[start:stop]`` (whole lines), or None if it has none."""
    buf = u8[start:stop]
    if not buf.size:
        return None
    sep = buf <= _SPACE
    line_end = np.flatnonzero(buf == _NEWLINE)
    _check_separators(buf, line_end.size)
    # a token starts where a separator is followed by a non-separator (or at the chunk's first byte)
    tok_start = np.flatnonzero(np.greater(sep[:-1], sep[1:])) + 1
    if not sep[0]:
        tok_start = np.concatenate(([0], tok_start))
    del sep
    if not tok_start.size:
        return None
    if not line_end.size or line_end[-1] != buf.size - 1:
        line_end = np.append(line_end, buf.size)
    n_lines = line_end.size
    if tok_start.size == fields * n_lines and _uniform(buf, tok_start, line_end, fields):
        # the usual file: every line a data line of exactly `fields` tokens; fields are strided views
        starts = [tok_start[i::fields] for i in range(fields)]
        line_start = None
    else:
        tokens_before = np.searchsorted(tok_start, line_end)
        first = np.concatenate(([0], tokens_before[:-1]))
        count = tokens_before - first
        line_start = np.concatenate(([0], line_end[:-1] + 1))
        is_data = count > 0
        is_data[is_data] = buf[tok_start[first[is_data]]] != _HASH
        first, count, line_start = first[is_data], count[is_data], line_start[is_data]
        if not first.size:
            return None
        bad = count != fields if fields == 4 else count < fields
        if bad.any():
            raise LineError(start + int(line_start[np.argmax(bad)]))
        starts = [tok_start[first + i] for i in range(fields)]

    q_start = starts[0] + start
    d_start = starts[2] + start
    v_start = starts[value_field] + start
    qid = _qid_ids(data, u64, q_start, *_token_words(u64, q_start, starts[1] + start), qid_index)
    key, d_len = _token_words(u64, d_start, starts[3] + start)
    v_words, v_len = _token_words(
        u64, v_start, starts[value_field + 1] + start if fields == 6 else None, words=fields == 4
    )
    value = _floats(u64, v_start, v_len) if fields == 6 else _ints(v_words, v_len)
    if value is None:
        bad_line = _first_bad_number(data, v_start, v_len, fields == 6)
        raise LineError(start + int(_line_starts(line_end)[bad_line] if line_start is None else line_start[bad_line]))
    tag = None
    if fields == 6:
        t_start = int(starts[5][-1]) + start
        t_len = int(_token_words(u64, np.array([t_start]))[1][0])
        tag = bytes(data[t_start : t_start + t_len])
    return qid, key, d_start, d_len.astype(np.int32), mix(key), value, tag


def _line_starts(line_end: np.ndarray) -> np.ndarray:
    return np.concatenate(([0], line_end[:-1] + 1))


def _uniform(buf: np.ndarray, tok_start: np.ndarray, line_end: np.ndarray, fields: int) -> bool:
    """Whether line j holds exactly tokens ``fields*j .. fields*j + fields - 1`` and is not a comment."""
    first = tok_start[::fields]
    last = tok_start[fields - 1 :: fields]
    if (last >= line_end).any() or (first[1:] <= line_end[:-1]).any():
        return False
    return not (buf[first] == _HASH).any()


def _check_separators(buf: np.ndarray, n_newlines: int) -> None:
    """Fallback unless every byte <= 32 is ASCII whitespace and every ``\\r`` ends a ``\\r\\n`` line."""
    if int(np.count_nonzero(buf < _SPACE)) == n_newlines:
        return  # only spaces and newlines: the usual file
    values = buf[buf < _SPACE]
    if not ((values >= 9) & (values <= 13)).all():  # NUL, ESC, ... are part of a token for bytes.split()
        raise Fallback
    cr = np.flatnonzero(buf == _CR)
    if cr.size and (cr[-1] == buf.size - 1 or (buf[cr + 1] != _NEWLINE).any()):
        raise Fallback  # a lone \\r ends a line for bytes.splitlines()


_SEPARATORS = np.uint64(0x2121212121212121)  # 33 in every byte: bytes below it end a token


def _token_words(
    u64: np.ndarray, start: np.ndarray, next_start: np.ndarray | None = None, words: bool = True
) -> tuple[np.ndarray | None, np.ndarray]:
    """Words (as :func:`_words`) and lengths of the tokens starting at ``start``.

    With ``next_start`` (the start of the following token on the same line), a token followed by a single
    separator byte is ``next_start - start - 1`` long; otherwise each token's end is found with SWAR: it
    ends at its first byte <= 32, and ``(x - 0x21..) & ~x & 0x80..`` flags the lowest such byte of a word
    exactly (flags above it may be spurious and are ignored).
    """
    if next_start is not None:
        length = next_start - start - 1
        if ((u64[start + length - 1] & np.uint64(0xFF)) > np.uint64(_SPACE)).all():
            return (_words(u64, start, length) if words else None), length
    length = np.full(start.size, -1, dtype=np.int64)
    for i in range(PAD // 8 - 2):
        w = u64[start + 8 * i]
        flags = (w - _SEPARATORS) & ~w & _HIGHS
        new = (flags != 0) & (length < 0)
        length[new] = 8 * i + _lowest_byte(flags[new])
        if (length >= 0).all():
            return (_words(u64, start, length) if words else None), length
    raise Fallback  # a token longer than the padding


def _words(u64: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Bytes of each token as zero-padded little-endian 8-byte words ``[L, ceil(max length / 8)]``."""
    shortest, longest = (int(length.min()), int(length.max())) if length.size else (0, 0)
    width = max(1, -(-longest // 8))
    out = np.empty((start.size, width), dtype=np.uint64)
    for i in range(width):
        out[:, i] = u64[start + 8 * i]
        if shortest < 8 * (i + 1):  # some token ends inside this word: clear the bytes after it
            out[:, i] &= _MASKS[np.clip(length - 8 * i, 0, 8)]
    return out


def _qid_ids(
    data: bytearray,
    u64: np.ndarray,
    start: np.ndarray,
    words: np.ndarray,
    length: np.ndarray,
    qid_index: dict[bytes, int],
) -> np.ndarray:
    """Index of each line's qid in ``qid_index`` (extended with new qids in order of appearance)."""
    changes = np.flatnonzero((words[1:] != words[:-1]).any(axis=1)) + 1
    heads = np.concatenate(([0], changes))
    if heads.size > 4096 and heads.size * 4 > start.size:  # not grouped by query: find distinct rows
        _, head_of, inverse = np.unique(
            words.view(f"V{8 * words.shape[1]}")[:, 0], return_index=True, return_inverse=True
        )
        ids = np.array(
            [
                qid_index.setdefault(bytes(data[s : s + n]), len(qid_index))
                for s, n in zip(start[head_of].tolist(), length[head_of].tolist(), strict=True)
            ]
        )
        return ids[inverse.reshape(-1)].astype(np.int32)
    ids = np.array(
        [
            qid_index.setdefault(bytes(data[s : s + n]), len(qid_index))
            for s, n in zip(start[heads].tolist(), length[heads].tolist(), strict=True)
        ],
        dtype=np.int32,
    )
    return np.repeat(ids, np.diff(np.append(heads, start.size)))


def _words_text(words: np.ndarray) -> np.ndarray:
    return words.view(f"S{8 * words.shape[1]}")[:, 0]  # NUL padding is stripped by the S dtype


def _ints(words: np.ndarray, length: np.ndarray) -> np.ndarray | None:
    """Parse integer tokens (Python ``int`` syntax without ``_``); None if any token is not one."""
    if words.shape[1] == 1 and (length == 1).all():
        digits = (words[:, 0] & np.uint64(0xFF)).astype(np.int64) - 48  # one-digit labels, the usual case
        return digits if ((digits >= 0) & (digits <= 9)).all() else None
    if (words.view(np.uint8) == _UNDERSCORE).any():  # Python accepts 1_000; trec_eval does not
        return None
    try:
        return _words_text(words).astype(np.int64)
    except (ValueError, OverflowError):
        return None


def _swar8(x: np.ndarray) -> np.ndarray:
    """The 8-digit number whose digits (0-9, first digit in the lowest byte) are the bytes of ``x``."""
    x = x * np.uint64(10) + (x >> np.uint64(8))
    x &= np.uint64(0x00FF00FF00FF00FF)
    x = x * np.uint64(100) + (x >> np.uint64(16))
    x &= np.uint64(0x0000FFFF0000FFFF)
    x = x * np.uint64(10000) + (x >> np.uint64(32))
    return x & np.uint64(0xFFFFFFFF)


def _lowest_byte(bits: np.ndarray) -> np.ndarray:
    """Index (0-7) of the lowest byte whose high bit is set in each of ``bits`` (8 where none)."""
    lowest = bits & (~bits + np.uint64(1))
    return np.where(bits == 0, 8, np.bitwise_count(lowest - np.uint64(1)).astype(np.int64) // 8)


def _floats(u64: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray | None:
    """Parse score tokens as Python's ``float`` does; None if any token is not a number (or is NaN).

    Plain decimals (``-12.3456``, at most 15 digits and 16 characters after the sign), nearly every score
    written by a retrieval system, are parsed exactly with SWAR arithmetic on 8-byte words: the digits
    form an integer ``M < 2**53`` and the value is ``M / 10**f``, one correctly rounded division, hence
    the same double as ``strtod``. Other tokens (exponents, ``inf``, long digit strings) go through
    numpy's string-to-float conversion.
    """
    first = u64[start] & np.uint64(0xFF)
    sign = (first == np.uint64(45)) | (first == np.uint64(43))  # '-' or '+'
    begin = start + sign
    n = length - sign
    mask0 = _MASKS[np.clip(n, 0, 8)]
    mask1 = _MASKS[np.clip(n - 8, 0, 8)]
    x0 = (u64[begin] ^ _ZEROS) & mask0  # digits become 0-9, "." becomes 0x1E, bytes past the end 0
    x1 = (u64[begin + 8] ^ _ZEROS) & mask1
    dots = []
    for x, m in ((x0, mask0), (x1, mask1)):
        e = x ^ _DOTS
        dots.append((e - _ONES) & ~e & _HIGHS & m)  # high bit of each "." byte (exact up to the first)
    dot0, dot1 = dots
    n_dots = np.bitwise_count(dot0) + np.bitwise_count(dot1)
    # clear the "." byte, then every remaining byte must be a digit
    x0 &= ~((dot0 >> np.uint64(7)) * np.uint64(0xFF))
    x1 &= ~((dot1 >> np.uint64(7)) * np.uint64(0xFF))
    not_digit = ((((x0 & _LOW7) + _ABOVE9) | x0) & _HIGHS) | ((((x1 & _LOW7) + _ABOVE9) | x1) & _HIGHS)
    dot_at = np.where(dot0 != 0, _lowest_byte(dot0), 8 + _lowest_byte(dot1))
    has_dot = n_dots == 1
    n_digits = n - has_dot
    plain = (n >= 1) & (n <= 16) & (n_dots <= 1) & (not_digit == 0) & (n_digits >= 1) & (n_digits <= 15)
    # digits (the "." read as a 0) as one integer: V = I * 10**(f+1) + F with f fraction digits
    raw = _swar8(x0) * np.uint64(100_000_000) + _swar8(x1)
    v = raw // _POW10[np.clip(16 - n, 0, 19)]
    f = np.where(has_dot, n - 1 - dot_at, 0).clip(0, 18)
    scale = _POW10[f + has_dot]
    mantissa = np.where(has_dot, (v // scale) * _POW10[f] + v % scale, v)
    value = mantissa.astype(np.float64) / _POW10F[f]
    value = np.where(first == np.uint64(45), -value, value)
    odd = np.flatnonzero(~plain)
    if odd.size:
        words = _words(u64, start[odd], length[odd])
        if (words.view(np.uint8) == _UNDERSCORE).any():  # Python accepts 1_000; trec_eval's strtod does not
            return None
        try:
            value[odd] = _words_text(words).astype(np.float64)
        except (ValueError, OverflowError):
            return None
        if np.isnan(value[odd]).any():
            return None
    return value


_INT64 = np.iinfo(np.int64)


def _first_bad_number(data: bytearray, start: np.ndarray, length: np.ndarray, is_float: bool) -> int:
    """Index of the first token that is not a valid number (a NaN score, a label outside int64 count as invalid)."""
    for i, (s, n) in enumerate(zip(start.tolist(), length.tolist(), strict=True)):
        raw = bytes(data[s : s + n])
        try:
            value = float(raw) if is_float else int(raw)
        except ValueError:
            return i
        if b"_" in raw or value != value:
            return i
        if not is_float and not _INT64.min <= value <= _INT64.max:
            return i
    raise Fallback  # the vectorised parse disagreed with Python's: let the careful reader decide
