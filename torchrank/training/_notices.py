"""Lightning's notices that say nothing about a ranker's training, hidden once for the command line and Python alike.

:func:`hide_lightning_noise` runs when a :class:`~torchrank.training.LetorDataModule` or
:class:`~torchrank.training.MLPRanker` is built (so a script that builds its own ``lightning.Trainer`` with them sees
the same output as the command line) and at the start of the command line's ``main``; not at import, so that a
process that only imports :mod:`torchrank.training` (or reads files with it) keeps its warning filters as they were.
The filters last for the process (a ``warnings.catch_warnings`` block, pytest's per test for one, restores the
filters it found when it ends).
"""

from __future__ import annotations

import logging
import warnings

__all__ = ["NOISY_NOTICES", "NOISY_WARNINGS", "hide_lightning_noise"]

#: Lightning's info lines that are dropped (message prefixes): device probes that say nothing on a CPU run, and
#: advertisements for Lightning's cloud services.
NOISY_NOTICES = ("GPU available:", "TPU available:", "HPU available:", "💡 Tip:")
#: Lightning's warnings that are dropped (regular expressions matched at the message's start), each harmless here:
#: the CSV logger is the intended one; a deprecation inside Lightning itself; a test of a fit's checkpoint writes
#: to a new run folder; the data are tensors in memory, so loader worker processes would only add start-up time.
NOISY_WARNINGS = (
    r"Starting from v1\.9\.0, `tensorboardX` has been removed",
    r"`isinstance\(treespec, LeafSpec\)` is deprecated",
    r"The dirpath has changed from",
    r"The '\w+_dataloader' does not have many workers",
)
_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero")


class _DropNotices(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(NOISY_NOTICES)


_DROP = _DropNotices()


def hide_lightning_noise() -> None:
    """From now on in this process, Lightning's :data:`NOISY_NOTICES` and :data:`NOISY_WARNINGS` are not shown;
    its other messages, and every warning of torchrank, torch or the user's code, are. Calling it again adds nothing.

    Example:
        >>> hide_lightning_noise()
        >>> logging.getLogger(_LOGGERS[0]).info("GPU available: False, used: False")  # not shown
    """
    for name in _LOGGERS:
        logging.getLogger(name).addFilter(_DROP)  # a filter already there is not added twice
    for pattern in NOISY_WARNINGS:
        warnings.filterwarnings("ignore", message=pattern)  # an equal filter moves to the front, not doubled
