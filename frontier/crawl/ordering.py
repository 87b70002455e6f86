"""Which URL next: the scorers that give each queued URL its priority (`ordering.scorer`).

A scorer sees each fetched page once, with its outlinks, and returns one priority per outlink. A URL new to the
crawl is queued with it; a URL already queued (and not leased) is re-scored: its entry moves in its host's queue
(`frontier.state.base.Rescore`: one entry, nothing duplicated). The state then leases, host by host, the best
entry first, and among the hosts politeness allows now the one whose best entry ranks highest.

    fifo      every URL priority 0: breadth-first within a host, as before priorities (no re-scores)
    inlinks   a URL's priority is the number of links to it seen so far (each page's link counts once)
    opic      On-line Page Importance Computation (Abiteboul, Preda, Cobena, WWW 2003): seeds start with
              cash 1; a fetched page's cash (its priority when leased) is split equally among its outlinks,
              added to what they hold, queued ones included
    "package.module:callable"   yours: an object following `Scorer`, or a function (ScoredPage) -> priorities
              (then `additive` False: a queued URL's priority is set to the new value)

Priorities are floats within +-1e12 (frontier.state.base.check_priority); a scorer's bad value is counted
(reason "bad_priority") and the link keeps priority 0, never stopping the crawl.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from frontier.config import DEFAULT_SCORER, SCORERS
from frontier.errors import ConfigError

__all__ = ["DEFAULT_SCORER", "SCORERS", "InLinks", "Opic", "ScoredPage", "Scorer", "load_scorer"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScoredPage:
    """What a scorer is told about one fetched page. `priority`: the page's own priority when it was leased (its
    OPIC cash); `outlinks`: canonical, in scope as far as the worker could tell, each once; `counters`: the
    crawl's outcome counters so far (read only)."""

    url: str
    depth: int
    priority: float
    outlinks: Sequence[str]
    counters: Mapping[str, int]


@runtime_checkable
class Scorer(Protocol):
    """Gives a fetched page's outlinks their priorities.

    `seed_priority`: what a seed starts with when the caller names none. `additive`: True when a returned value
    is added to the priority of a URL already queued (a share of something, as OPIC's cash or one in-link);
    False when it replaces it."""

    seed_priority: float
    additive: bool

    def __call__(self, page: ScoredPage) -> Sequence[float]:
        """One priority per `page.outlinks`, in order."""


class InLinks:
    """Priority = links to the URL seen so far: each page adds 1 to each of its outlinks."""

    seed_priority = 0.0
    additive = True

    def __call__(self, page: ScoredPage) -> Sequence[float]:
        return [1.0] * len(page.outlinks)


class Opic:
    """OPIC: a page's cash, split equally among its outlinks, is added to theirs; seeds start with `seed_priority`."""

    additive = True

    def __init__(self, seed_priority: float = 1.0) -> None:
        self.seed_priority = seed_priority

    def __call__(self, page: ScoredPage) -> Sequence[float]:
        if not page.outlinks:
            return []
        return [page.priority / len(page.outlinks)] * len(page.outlinks)


class _Plain:
    """A user's plain function as a Scorer: its values replace a queued URL's priority."""

    seed_priority = 0.0
    additive = False

    def __init__(self, function: object) -> None:
        self._function = function

    def __call__(self, page: ScoredPage) -> Sequence[float]:
        return self._function(page)  # type: ignore[operator]


def load_scorer(name: str) -> Scorer | None:
    """The scorer a name stands for; None for fifo (no scoring at all). ConfigError (key ordering.scorer) if a
    user scorer cannot be imported or is not callable."""
    if name == "fifo":
        return None
    if name == "inlinks":
        return InLinks()
    if name == "opic":
        return Opic()
    module_name, _, attr = name.partition(":")
    try:
        target: object = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot load {name!r}: {exc}", key="ordering.scorer") from None
    if isinstance(target, type):
        target = target()
    if isinstance(target, Scorer):
        return target
    if callable(target):
        return _Plain(target)
    raise ConfigError(f"{name!r} is not callable", key="ordering.scorer")
