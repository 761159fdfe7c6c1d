"""A compiled id matching, for comparison only: torchrank does not ship it (it would add a numba dependency).

Issue 23 asks id lists to cost within 1.5x of the dense call up to 50 relevant ids per query. On CPU, torchrank's
matching is one numpy sort of each query's ``K + M`` packed keys (:func:`torchrank.functional.ids_to_dense`); this
contender shows what a compiled kernel would give instead, so that whether such a kernel is worth a dependency is
decided on a measurement: ``bench_ids`` times it beside the library's routes when numba imports (ranx, one of the
benchmarked peers, brings it).

Per query, one loop in compiled code: the relevant ids go into a small open-addressing hash table (an id's largest
label kept, repeats counted once), then each ranked id is looked up; a found id is a hit at its first position only
(later copies are not relevant), as ``ids_to_dense`` documents. The table is never cleared: each slot remembers the
query that wrote it.

Example:
    >>> import torch
    >>> out = compiled_ids_to_dense(torch.tensor([[7, 3, 9]]), torch.tensor([[3, 8]]))
    >>> out["target"].tolist(), out["ideal_target"].tolist()
    ([[0, 1, 0]], [[1, 1]])
"""

from __future__ import annotations

import numba
import numpy as np
import torch

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the top bits of id * 2^64 / phi


@numba.njit(nogil=True, cache=False)
def _match(ranked, relevant, labels, pad, target, ideal):  # pragma: no cover - compiled
    queries, k = ranked.shape
    m = relevant.shape[1]
    size = 1
    while size < 4 * m:  # load factor at most 1/4: most lookups end at their first slot
        size *= 2
    shift = np.uint64(64 - int(np.log2(size)))
    last = np.uint64(size - 1)
    ids = np.empty(size, ranked.dtype)
    owner = np.full(size, -1, np.int64)  # the query whose ids the slot holds
    label = np.zeros(size, labels.dtype)
    taken = np.zeros(size, np.bool_)  # a ranked copy already counted
    order = np.empty(m, np.int64)  # the slots of this query's distinct relevant ids, in input order
    for q in range(queries):
        distinct = 0
        for j in range(m):
            x = relevant[q, j]
            if x == pad:
                continue
            h = (np.uint64(x) * _GOLDEN) >> shift
            while owner[h] == q and ids[h] != x:
                h = (h + np.uint64(1)) & last
            if owner[h] != q:
                owner[h], ids[h], label[h], taken[h] = q, x, labels[q, j], False
                order[distinct] = h
                distinct += 1
            elif labels[q, j] > label[h]:
                label[h] = labels[q, j]
        for j in range(k):
            x = ranked[q, j]
            target[q, j] = 0
            if x == pad:
                continue
            h = (np.uint64(x) * _GOLDEN) >> shift
            while owner[h] == q:
                if ids[h] == x:
                    if not taken[h]:
                        taken[h] = True
                        target[q, j] = label[h]
                    break
                h = (h + np.uint64(1)) & last
        for j in range(m):
            ideal[q, j] = label[order[j]] if j < distinct else 0


def compiled_ids_to_dense(ranked_ids: torch.Tensor, relevant_ids: torch.Tensor,
                          relevant_labels: torch.Tensor | None = None, pad_id: int = -1) -> dict[str, torch.Tensor]:
    """``ids_to_dense``'s output for CPU integer ids (the ideal's labels in another order: the same measures)."""
    ranked, relevant = ranked_ids.numpy(), relevant_ids.numpy()
    labels = np.ones_like(relevant) if relevant_labels is None else relevant_labels.numpy()
    target = np.empty(ranked.shape, labels.dtype)
    ideal = np.empty(relevant.shape, labels.dtype)
    _match(ranked, relevant, labels, pad_id, target, ideal)
    k = ranked.shape[1]
    preds = torch.arange(k, 0, -1, dtype=torch.get_default_dtype()).expand(ranked.shape)
    return {"preds": preds, "target": torch.from_numpy(target), "mask": torch.from_numpy(ranked != pad_id),
            "ideal_target": torch.from_numpy(ideal)}
