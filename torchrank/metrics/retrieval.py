"""Dense-retrieval evaluation at corpus scale: queries searched against a corpus of embeddings, the corpus sharded
over processes and never gathered.

:class:`CorpusRetrieval` keeps two things apart. The corpus (``update_corpus``) stays on the process that added it
and is never a synced state: ``compute`` searches each process's own shard with
:func:`torchrank.functional.search`. The queries (``update_queries``: embeddings and judged ids) are small and are
gathered, so every process searches its shard for every query; the per-shard top ``k`` are then gathered and merged
exactly with :func:`torchrank.functional.merge_top_k` (highest score first, equal scores by lowest id, as
``search`` orders them), and the measures are computed from the merged lists as
:class:`~torchrank.metrics.RankingMetrics` computes them from id lists. The result does not depend on how the
corpus and the queries were split over processes and updates.

Example:
    >>> import torch
    >>> metric = CorpusRetrieval(["ndcg@2", "recall@2"], k=2)
    >>> metric.update_corpus(torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]]), ids=torch.tensor([10, 11, 12]))
    >>> metric.update_queries(torch.tensor([[0.9, 0.1]]), relevant_ids=torch.tensor([[12, 99]]))
    >>> {name: round(value.item(), 4) for name, value in metric.compute().items()}  # id 99 is not in the corpus
    {'ndcg@2': 0.3869, 'recall@2': 0.5}
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities.distributed import gather_all_tensors

import torchrank.functional as F
from torchrank.functional.backends import raises_at_once
from torchrank.functional.checks import check_choice, described, is_integer_tensor
from torchrank.functional.corpus_search import PAD_ID, SIMILARITIES
from torchrank.functional.ids import first_occurrence
from torchrank.functional.measures import parse_measure
from torchrank.metrics._base import (
    KeepStateOnError,
    NothingToComputeInOurWords,
    caller_stacklevel,
    refuse_torchmetrics_names,
)
from torchrank.metrics.classes import RankingMetrics

__all__ = ["CorpusRetrieval"]

# (method, argument, problem) of the checks that read values: on CPU they run in the update, which then refuses the
# batch; on other devices they run on the device and the first update with each problem is raised at compute
PROBLEMS = (
    ("update_corpus", "embeddings", "holds NaN or infinity"),
    ("update_corpus", "ids", "holds a negative id (ids are >= 0; -1 marks padding)"),
    ("update_queries", "embeddings", "holds NaN or infinity"),
    ("update_queries", "relevant_labels", "holds a negative or NaN label"),
)
_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# Corpus blocks (one per update_corpus call) are searched in groups of at most this many bytes of embeddings: a
# validation epoch adds thousands of small blocks, and each search and merge has a fixed cost; a group is copied once
# (the concatenation), beside the search's chunk: under a memory budget, groups take at most a quarter of it
_GROUP_BYTES = 2**28
_NO_QUERY = ("CorpusRetrieval.compute(): no query was added by update_queries (on any process) since the metric was "
             "created or reset, so every value is NaN.")
# the metadata each process sends in a sync: queries, query dim, relevant width, query dtype, corpus rows, corpus dim,
# corpus dtype, then the first update with each of PROBLEMS
_META = 7


class CorpusRetrieval(KeepStateOnError, NothingToComputeInOurWords, Metric):
    """Measures of exact top-``k`` retrieval from a corpus of embeddings, over every query of every process.

    ``update_corpus(embeddings, ids)`` adds a shard of the corpus (any number of calls, on any process; the rows stay
    where they are), ``update_queries(embeddings, relevant_ids, relevant_labels=None)`` adds queries with their
    judged documents, and ``compute()`` returns ``{measure: value}``: each query is searched against the whole
    corpus (:func:`torchrank.functional.search`, chunked: the extra memory is about ``queries x (k + chunk)``
    scores per process), its top ``k`` ids and scores read as :func:`torchrank.functional.ids_to_dense` reads them.

    Across processes (``sync_on_compute``, the default) the queries are gathered, each process searches its own
    corpus shard, and the shards' top ``k`` are gathered and merged exactly: no process holds another's corpus.
    Values are the same on 1 and N processes, with uneven shards, and with processes that added no corpus or no
    query.

    Args:
        measures: Names in the grammar of :func:`torchrank.functional.evaluate` (``"ndcg@10"``, ``"recall@100"``,
            ``"mrr@10"``, ``"map@100"``, ...). A measure without a cut-off (``"map"``) reads the top ``k``, as
            trec_eval reads a run of depth ``k``; a cut-off deeper than ``k`` is refused.
        k: How many documents are retrieved per query.
        similarity: ``"dot"``, ``"cosine"`` or ``"euclidean"``, as :func:`torchrank.functional.search`.
        chunk_size: Corpus rows per matrix product (None: within the memory budget, as ``search``).
        keep_per_query: Keep each query's values (:meth:`per_query_values`; queries in the order of the gathered
            updates: process 0's first).
        aggregation: ``"mean"``, ``"median"``, ``"min"`` or ``"max"`` over queries.
        kwargs: ``evaluate``'s options (``ties``: how equal scores within the top ``k`` are valued, ``"average"`` by
            default; ``empty_target_action``, ``relevance_threshold``, ``validate_args``) and torchmetrics' ``Metric``
            options (``sync_on_compute``, ``process_group``, ``dist_sync_fn``, ...).

    What the inputs mean:

    - Ids are integers >= 0, unique over the whole corpus; ``-1`` pads ``relevant_ids``. A judged id that was never
      added to the corpus still counts in R and in the ideal ranking (the query's recall cannot reach 1), as
      ``ids_to_dense`` counts a relevant id that was not retrieved.
    - An id added twice (on one process or on two) is two documents with one id: ``compute`` raises when both copies
      reach one query's top ``k``; otherwise the copy that ranks lower has no effect on any value.
    - With fewer than ``k`` documents in the whole corpus, each list holds them all and is padded; the measures read
      padding as no document (``P@k`` still divides by ``k``).
    - NaN or infinite embeddings, negative corpus ids, negative or NaN labels: a CPU update refuses the batch
      (``ValueError``, nothing stored); on other devices the batch is checked on the device without a host read and
      ``compute`` raises, on every process, naming the first such update (fix the input, then ``reset()``).
    - Embeddings must share one dimension and one dtype (float32, float16, bfloat16 or float64) on every process;
      scores are those of the matrix product in that dtype.

    Example:
        >>> import torch
        >>> metric = CorpusRetrieval(["mrr@10", "P@1"], k=10)
        >>> metric.update_corpus(torch.eye(4), ids=torch.arange(4))
        >>> metric.update_queries(torch.tensor([[0.0, 1.0, 0.5, 0.0], [1.0, 0.0, 0.0, 0.0]]),
        ...                       relevant_ids=torch.tensor([[2, -1], [0, 3]]))
        >>> {name: value.item() for name, value in metric.compute().items()}  # ranks 2 and 1
        {'mrr@10': 0.75, 'P@1': 0.5}
    """

    is_differentiable = False
    higher_is_better: bool | None = True
    full_state_update = False
    plot_lower_bound: float | None = 0.0
    plot_upper_bound: float | None = 1.0

    problems: Tensor  # [len(PROBLEMS)] int64: the first update with each problem (0: none)

    def __init__(
        self,
        measures: Sequence[str],
        k: int,
        similarity: str = "dot",
        *,
        chunk_size: int | None = None,
        keep_per_query: bool = False,
        aggregation: str = "mean",
        **kwargs: Any,
    ) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"Argument `k` must be a positive int (documents retrieved per query), got {k!r}.")
        check_choice("similarity", similarity, SIMILARITIES)
        if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int)
                                       or chunk_size < 1):
            raise ValueError(f"Argument `chunk_size` must be a positive int or None, got {chunk_size!r}.")
        if isinstance(measures, str):
            raise TypeError("Argument `measures` must be a sequence of names, got a single string.")
        for name in measures:
            cutoff = parse_measure(name).k
            if cutoff is not None and cutoff > k:
                raise ValueError(f"Measure {name!r} reads the top {cutoff}, deeper than the {k} documents retrieved "
                                 f"per query (`k={k}`): retrieve at least {cutoff}.")
        options = set(inspect.signature(F.evaluate).parameters)
        measure_options = {name: kwargs.pop(name) for name in list(kwargs) if name in options}
        # torchmetrics' `top_k` is a cut-off in the measures' names here, not `k`, the documents retrieved
        takes = {"measures", "similarity", "chunk_size", "keep_per_query", "aggregation", *measure_options}
        refuse_torchmetrics_names(type(self).__name__, kwargs, takes)
        super().__init__(**kwargs)
        # the measures of the merged lists: a local metric (the lists are the same on every process once merged)
        self.measures = RankingMetrics(measures, keep_per_query=keep_per_query, aggregation=aggregation,
                                       sync_on_compute=False, **measure_options)
        self.k, self.similarity, self.chunk_size = k, similarity, chunk_size
        self.add_state("query_embeddings", [], dist_reduce_fx="cat")
        self.add_state("query_relevant_ids", [], dist_reduce_fx="cat")
        self.add_state("query_relevant_labels", [], dist_reduce_fx="cat")
        self.add_state("problems", torch.zeros(len(PROBLEMS), dtype=torch.int64), dist_reduce_fx="max")
        # the corpus shard: plain attributes, not states, so that neither a sync gathers it nor torchmetrics' copy of
        # the states around a synced compute duplicates it
        self._corpus: list[Tensor] = []
        self._corpus_ids: list[Tensor] = []

    # ------------------------------------------------------------------ updates
    def update(self, *args: Any, **kwargs: Any) -> None:
        """Not used: add documents with :meth:`update_corpus` and queries with :meth:`update_queries`."""
        raise TypeError("CorpusRetrieval takes documents through `update_corpus(embeddings, ids)` and queries through "
                        "`update_queries(embeddings, relevant_ids, relevant_labels=None)`.")

    def update_corpus(self, embeddings: Tensor, ids: Tensor) -> None:
        """Add documents ``embeddings [C, D]`` with their integer ``ids [C]`` (unique over the corpus, >= 0) to this
        process's shard. A refused call stores nothing."""
        if not isinstance(embeddings, Tensor) or embeddings.ndim != 2 or not embeddings.is_floating_point():
            raise ValueError(f"Argument `embeddings` must be a [documents, dim] float tensor, got "
                             f"{described(embeddings)}.")
        if not is_integer_tensor(ids) or ids.shape != embeddings.shape[:1] or ids.dtype == torch.uint64:
            raise ValueError(f"Argument `ids` must be a [{embeddings.shape[0]}] integer tensor (one id per row of "
                             f"`embeddings`), got {described(ids)}.")
        if ids.device != embeddings.device:
            raise ValueError(f"Argument `ids` must be on {embeddings.device}, got {ids.device}.")
        self._check_like_before("update_corpus", embeddings)
        found = [_not_finite(embeddings), (ids < 0).any()]
        self._record(found, offset=0, on=embeddings)
        self._begin_update()
        self._corpus.append(embeddings.detach())
        self._corpus_ids.append(ids.to(torch.int64))

    def update_queries(self, embeddings: Tensor, relevant_ids: Tensor, relevant_labels: Tensor | None = None) -> None:
        """Add queries ``embeddings [B, D]`` with the ids of their judged documents ``relevant_ids [B, M]`` (-1 pads)
        and their labels ``relevant_labels [B, M]`` (None: every judged id has label 1). A refused call stores
        nothing."""
        if not isinstance(embeddings, Tensor) or embeddings.ndim != 2 or not embeddings.is_floating_point():
            raise ValueError(f"Argument `embeddings` must be a [queries, dim] float tensor, got "
                             f"{described(embeddings)}.")
        if not is_integer_tensor(relevant_ids) or relevant_ids.ndim != 2 \
                or relevant_ids.shape[0] != embeddings.shape[0] or relevant_ids.dtype == torch.uint64:
            raise ValueError(f"Argument `relevant_ids` must be a [{embeddings.shape[0]}, M] integer tensor (-1 pads), "
                             f"got {described(relevant_ids)}.")
        if relevant_labels is not None and (not isinstance(relevant_labels, Tensor)
                                            or relevant_labels.shape != relevant_ids.shape):
            raise ValueError(f"Argument `relevant_labels` must be a tensor of shape {tuple(relevant_ids.shape)}, got "
                             f"{described(relevant_labels)}.")
        for name, other in (("relevant_ids", relevant_ids), ("relevant_labels", relevant_labels)):
            if other is not None and other.device != embeddings.device:
                raise ValueError(f"Argument `{name}` must be on {embeddings.device}, got {other.device}.")
        self._check_like_before("update_queries", embeddings)
        ids = relevant_ids.to(torch.int64)
        labels = (ids != PAD_ID).to(torch.float64) if relevant_labels is None else relevant_labels.to(torch.float64)
        bad_labels = ((labels < 0) | torch.isnan(labels)) & (ids != PAD_ID)
        self._record([_not_finite(embeddings), bad_labels.any()], offset=2, on=embeddings)
        self._begin_update()
        self.query_embeddings.append(embeddings.detach())
        self.query_relevant_ids.append(ids)
        self.query_relevant_labels.append(torch.where(ids == PAD_ID, 0.0, labels))

    def _check_like_before(self, method: str, embeddings: Tensor) -> None:
        """One dimension and one dtype for every embedding of this process (the search multiplies them)."""
        earlier = [*self._corpus[:1], *self.query_embeddings[:1]]
        if earlier and (earlier[0].shape[1] != embeddings.shape[1] or earlier[0].dtype != embeddings.dtype):
            raise ValueError(f"Argument `embeddings` of {method} must be [*, {earlier[0].shape[1]}] {earlier[0].dtype} "
                             f"like the embeddings added before, got {described(embeddings)}.")

    def _record(self, found: list[Tensor], offset: int, on: Tensor) -> None:
        """Check values: now where the backend of ``on``'s device checks on the host (raising before anything is
        stored), else on the device for compute to raise."""
        if raises_at_once(on.device):
            for j, flag in enumerate(found):
                if bool(flag):
                    method, name, problem = PROBLEMS[offset + j]
                    raise ValueError(f"Argument `{name}` of {method} {problem}; nothing was added.")
            return
        update = self._update_count + 1  # the number this update gets
        flags = torch.stack(found).to(self.problems.device)
        window = self.problems[offset : offset + len(found)]
        window.copy_(torch.where((window == 0) & flags, update, window))

    def _begin_update(self) -> None:
        # what torchmetrics' wrapped `update` does: count the update and drop a cached result
        self._update_count += 1
        self._computed = None

    # ------------------------------------------------------------------ compute
    def compute(self) -> dict[str, Tensor]:
        """``{measure: value}`` over every query, each searched against the whole corpus (every process's shard)."""
        self._raise_for_problems()
        queries = _cat_rows(self.query_embeddings)
        relevant_ids = _padded_rows(self.query_relevant_ids, PAD_ID, torch.int64)
        labels = _padded_rows(self.query_relevant_labels, 0.0, torch.float64)
        if not self._is_synced:
            scores, ids = self._search_shard(queries)
        else:  # every process holds every query: merge the shards' top k
            scores, ids, failure = self._search_shard_or_nan(queries)
            gather = self.dist_sync_fn or gather_all_tensors
            every_scores, every_ids = gather(scores, self.process_group), gather(ids, self.process_group)
            if bool(torch.isnan(torch.cat(every_scores)).any()):  # a search failed: raise everywhere (one read)
                raise failure or ValueError("The search of another process's corpus shard failed (its error is "
                                            "raised there): no value.")
            scores, ids = F.merge_top_k(every_scores, every_ids, self.k)
        self._raise_for_repeated_ids(ids)
        self.measures.reset()
        self.measures.to(ids.device)  # where the search ran: the corpus's device, whatever this metric's
        if queries is None or not queries.shape[0]:  # the inner metric's warning would name it, and DDP wrongly
            if self.update_called:  # a corpus came; without any update, the compute wrapper has said it already
                warnings.warn(_NO_QUERY, UserWarning, stacklevel=caller_stacklevel())
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=r"RankingMetrics\.compute\(\) was called before any update",
                                        category=UserWarning)
                return self.measures.compute()
        labels = labels.to(ids.device)
        integral = bool((labels == labels.round()).all())  # integer labels take the exact integer matching
        self.measures.update(scores, ranked_ids=ids, relevant_ids=relevant_ids.to(ids.device),
                             relevant_labels=labels.to(torch.int64) if integral else labels, pad_id=PAD_ID)
        return self.measures.compute()

    def per_query_values(self) -> Tensor:
        """Each query's values ``[Q, measures]`` of the last :meth:`compute` (needs ``keep_per_query=True``)."""
        return self.measures.per_query_values()

    def _search_shard(self, queries: Tensor | None) -> tuple[Tensor, Tensor]:
        """The top ``k`` of this process's shard for every query: ``(scores, ids)`` ``[Q, k]``, padded where the
        shard holds fewer documents."""
        device = self._corpus[0].device if self._corpus else self.device
        if queries is None:
            queries = torch.zeros(0, self._corpus[0].shape[1] if self._corpus else 0, device=device,
                                  dtype=self._corpus[0].dtype if self._corpus else torch.float32)
        queries = queries.to(device)
        scores = queries.new_full((queries.shape[0], self.k), float("-inf"))
        ids = torch.full((queries.shape[0], self.k), PAD_ID, dtype=torch.int64, device=device)
        for block, block_ids in self._corpus_groups():
            found = F.search(queries, block, self.k, similarity=self.similarity, corpus_ids=block_ids,
                             chunk_size=self.chunk_size)
            scores, ids = F.merge_top_k([scores, found[0]], [ids, found[1]], self.k)
        return scores, ids

    def _search_shard_or_nan(self, queries: Tensor | None) -> tuple[Tensor, Tensor, ValueError | None]:
        """:meth:`_search_shard`, or NaN scores and the error where it raised (scores otherwise hold no NaN: search
        refuses them): the other processes learn of the failure from the gathered scores, not by waiting forever
        in the gather."""
        try:
            return (*self._search_shard(queries), None)
        except ValueError as err:
            rows = 0 if queries is None else queries.shape[0]
            device = self._corpus[0].device if self._corpus else self.device
            nan = torch.full((rows, self.k), torch.nan, device=device,
                             dtype=queries.dtype if queries is not None else torch.float32)
            return nan, torch.full((rows, self.k), PAD_ID, dtype=torch.int64, device=device), err

    def _corpus_groups(self) -> Any:
        """The shard's blocks, consecutive small ones concatenated up to ``_GROUP_BYTES``, or a quarter of the memory
        budget: the copy lives beside the search's own chunk, which the budget sizes."""
        limit = min(_GROUP_BYTES, (F.current_memory_budget() or 4 * _GROUP_BYTES) // 4)
        group: list[int] = []
        size = 0
        for j, block in enumerate(self._corpus):
            group.append(j)
            size += block.numel() * block.element_size()
            if size >= limit or j == len(self._corpus) - 1:
                if len(group) == 1:
                    yield self._corpus[group[0]], self._corpus_ids[group[0]]
                else:
                    yield torch.cat([self._corpus[i] for i in group]), torch.cat([self._corpus_ids[i] for i in group])
                group, size = [], 0

    def _raise_for_problems(self) -> None:
        """Raise for the first update with each problem (after a sync: on any process; one host read)."""
        for (method, name, problem), update in zip(PROBLEMS, self.problems.tolist(), strict=True):
            if update > 0:
                raise ValueError(f"Argument `{name}` of {method} {problem} in update {update} (counted from 1 since "
                                 "the last reset, on the process that saw it). Fix the input, then `reset()`.")

    def _raise_for_repeated_ids(self, ids: Tensor) -> None:
        repeated = ~first_occurrence(ids, PAD_ID) & (ids != PAD_ID)
        if bool(repeated.any()):
            id_ = ids[repeated][0].item()
            raise ValueError(f"Corpus id {id_} was added more than once (by update_corpus, on one process or on "
                             f"several), and two copies reached one query's top {self.k}; ids must be unique.")

    # ------------------------------------------------------------------ sync
    def _sync_dist(self, dist_sync_fn: Callable = gather_all_tensors, process_group: Any = None) -> None:
        """Gather the queries and the problem flags, never the corpus: first each process's counts, dims and dtypes
        (checked alike on every process, so that all of them raise or none), then the query states, padded to the
        widest relevant list."""
        group = process_group or self.process_group
        queries = _cat_rows(self.query_embeddings)
        ids = _padded_rows(self.query_relevant_ids, PAD_ID, torch.int64)
        labels = _padded_rows(self.query_relevant_labels, 0.0, torch.float64)
        device = queries.device if queries is not None else self.problems.device
        corpus = self._corpus[0] if self._corpus else None
        meta = torch.tensor([
            0 if queries is None else queries.shape[0], -1 if queries is None else queries.shape[1],
            0 if ids is None else ids.shape[1], -1 if queries is None else _DTYPES.index(queries.dtype),
            sum(block.shape[0] for block in self._corpus), -1 if corpus is None else corpus.shape[1],
            -1 if corpus is None else _DTYPES.index(corpus.dtype),
        ], dtype=torch.int64, device=device)
        every = torch.stack([m.to(device) for m in dist_sync_fn(torch.cat([meta, self.problems.to(device)]), group)])
        dims, dtypes = _agreed(every[:, :_META].tolist())
        self.problems = every[:, _META:].amax(0).to(self.problems.device)
        dtype = _DTYPES[dtypes] if dtypes >= 0 else torch.float32
        width = int(every[:, 2].max())
        queries = torch.zeros(0, max(dims, 0), dtype=dtype, device=device) if queries is None else queries
        ids = _widen(ids, width, PAD_ID, torch.int64, device)
        labels = _widen(labels, width, 0.0, torch.float64, device)
        self.query_embeddings = [torch.cat(dist_sync_fn(queries, group))]
        self.query_relevant_ids = [torch.cat(dist_sync_fn(ids, group))]
        self.query_relevant_labels = [torch.cat(dist_sync_fn(labels, group))]

    def reset(self) -> None:
        super().reset()
        self._corpus, self._corpus_ids = [], []
        self.measures.reset()


def _agreed(meta: list[list[int]]) -> tuple[int, int]:
    """The one embedding dim and dtype of every process's queries and corpus (-1: none anywhere); raises alike on
    every process when they differ."""
    dims = {row[j] for row in meta for j in (1, 5) if row[j] >= 0 and (row[0] if j == 1 else row[4]) > 0}
    dtypes = {row[j] for row in meta for j in (3, 6) if row[j] >= 0}
    if len(dims) > 1 or len(dtypes) > 1:
        shown = [f"process {p}: queries {row[1]}-d {_dtype_name(row[3])}, corpus {row[5]}-d {_dtype_name(row[6])}"
                 for p, row in enumerate(meta)]
        raise ValueError("Every process's query and corpus embeddings must share one dimension and dtype, got "
                         + "; ".join(shown) + ".")
    return (dims.pop() if dims else -1), (dtypes.pop() if dtypes else -1)


def _dtype_name(code: int) -> str:
    return "none" if code < 0 else str(_DTYPES[code])


def _not_finite(x: Tensor) -> Tensor:
    return ~torch.isfinite(x).all()


def _cat_rows(blocks: Tensor | list[Tensor]) -> Tensor | None:
    """A list state of row blocks as one tensor, or None when it holds none."""
    if isinstance(blocks, Tensor):
        return blocks
    return torch.cat(blocks) if blocks else None


def _padded_rows(blocks: Tensor | list[Tensor], pad: float, dtype: torch.dtype) -> Tensor | None:
    """Row blocks of several widths as one ``[rows, widest]`` tensor, padded on the right."""
    if isinstance(blocks, Tensor):
        return blocks
    if not blocks:
        return None
    width = max(block.shape[1] for block in blocks)
    return torch.cat([_widen(block, width, pad, dtype, block.device) for block in blocks])


def _widen(rows: Tensor | None, width: int, pad: float, dtype: torch.dtype, device: torch.device) -> Tensor:
    if rows is None:
        return torch.zeros(0, width, dtype=dtype, device=device)
    return torch.nn.functional.pad(rows, (0, width - rows.shape[1]), value=pad).to(device)

