"""The control actions of a running crawl: checked, applied on the frontier loop's thread, audited.

    controls = Controls.from_config(frontier, cfg, on_stop=channels.stop.set)
    controls.apply("exclude", {"regex": "/calendar/"}, caller="console 127.0.0.1")   -> {"purged": 12}
    controls.apply("pause", {}, caller="ctl")                                         -> {"paused": True, ...}
    controls.audit(50)                                                                -> the newest records

Names and bodies (docs/guide/console.md, "Steering a crawl"):

    pause {} / resume {}            leases stop / start again; the fetches in flight finish; a paused crawl
                                    never ends by itself
    stop {}                         a graceful stop of this frontier process, as SIGTERM (a rerun resumes)
    seeds {"urls": [...], "force": false}      -> {"added", "out_of_scope", "seen"}
    exclude {"regex": R} | {"host": H}         -> {"purged": queued URLs it matches, dropped unfetched}
    unexclude {"regex": R} | {"host": H}       -> {"removed": 1}
    block {"host": H, "seconds": S} | {"host": H, "until": T}   -> {"host", "until"}
    unblock {"host": H} / retire {"host": H} / unretire {"host": H}
    delay {"host": H, "seconds": S}            (0 removes the order)
    release {"host": H, "pattern": "/..."}     a suspected trap pattern; -> {"cleared": was it suspected here}
    checkpoint {"dir": ABSOLUTE_PATH}          -> {"dir", "bytes"}: a copy of the LMDB state to resume from

Standing orders (pause, exclusions, blocks, delays, retired hosts, released patterns) are written to the crawl
state (frontier.state.controls) before `apply` returns, so a kill -9 keeps them and, on Redis, every instance of
the crawl follows them (frontier.crawl.steering). Every applied action is appended to the audit log as
{"time", "caller", "action", "params", "effect"}. Bad input of any kind is a ControlError with one line; nothing
is changed or audited then.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from frontier.config import CrawlConfig
from frontier.crawl.scheduler import Frontier
from frontier.crawl.steering import Steering
from frontier.errors import FrontierError
from frontier.state.controls import BLOCK, DELAY, EXCLUDE_HOST, EXCLUDE_RE, PAUSED, RELEASE, RETIRE
from frontier.url.scope import normalize_host

MAX_SEEDS = 100_000  # URLs one seeds action takes
MAX_SECONDS = 365 * 86400.0  # the longest block or delay an action gives
MAX_REGEX = 2000  # characters of an exclusion's regex


class ControlError(FrontierError, ValueError):
    """Bad input to a control action (unknown action, wrong type, bad regex, unknown host, ...): one line."""


class _Params:
    """An action's body, read key by key with one-line errors; `done` refuses keys the action does not take."""

    def __init__(self, action: str, params: object) -> None:
        if not isinstance(params, Mapping):
            raise ControlError(f"{action}: the body must be a JSON object, not {type(params).__name__}")
        self.action = action
        self.params = params
        self._read: set[str] = set()

    def has(self, key: str) -> bool:
        return key in self.params

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        self._read.add(key)
        if key not in self.params:
            if default is ...:
                raise ControlError(f"{self.action}: {key!r} is required")
            return default
        value = self.params[key]
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)) or \
                not isinstance(value, kind):
            names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
            raise ControlError(f"{self.action}: {key!r} must be {names}, not {type(value).__name__}")
        return value

    def seconds(self, key: str, *, zero: bool = False) -> float:
        value = float(self.get(key, (int, float)))
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero) or value > MAX_SECONDS:
            low = "0" if zero else "more than 0"
            raise ControlError(f"{self.action}: {key!r} must be a number of seconds from {low} to {MAX_SECONDS:g}, "
                               f"not {self.params[key]!r}")
        return value

    def host(self) -> str:
        host = self.get("host", str)
        try:
            return normalize_host(host)
        except ValueError as e:
            raise ControlError(f"{self.action}: {e}") from None

    def done(self) -> None:
        extra = sorted(set(self.params) - self._read)
        if extra:
            keys = "key" if len(extra) == 1 else "keys"
            raise ControlError(f"{self.action}: unknown {keys} {', '.join(map(repr, extra))}")


class Controls:
    """The control actions over a `Frontier` with steering (`Frontier.steering`; see the module docstring)."""

    def __init__(self, frontier: Frontier, *, data_dir: str | Path | None = None,
                 on_stop: Callable[[], None] | None = None, clock: Callable[[], float] = time.time) -> None:
        """`data_dir`: the LMDB data dir (None: a Redis crawl, which has no checkpoint); `on_stop`: what `stop`
        does (the frontier process's stop event); `clock`: the wall clock of `block` and the audit records."""
        if frontier.steering is None:
            raise ValueError("the frontier has no steering: build it with Frontier.from_config")
        self.frontier = frontier
        self.steering: Steering = frontier.steering
        self._data_dir = None if data_dir is None else Path(data_dir)
        self._on_stop = on_stop
        self._clock = clock

    @classmethod
    def from_config(cls, frontier: Frontier, cfg: CrawlConfig,
                    on_stop: Callable[[], None] | None = None) -> Controls:
        return cls(frontier, data_dir=cfg.storage.data_dir if cfg.storage.backend == "lmdb" else None,
                   on_stop=on_stop)

    @property
    def paused(self) -> bool:
        return self.steering.paused

    def audit(self, limit: int = 100) -> list[dict[str, Any]]:
        """The newest `limit` audit records, oldest first."""
        return self.steering.store.audit(limit)

    def apply(self, name: str, params: Mapping[str, Any], caller: str) -> dict[str, Any]:
        """Check and apply one action; its effect (counts). ControlError for bad input, with nothing changed."""
        action = ACTIONS.get(name) if isinstance(name, str) else None
        if action is None:
            raise ControlError(f"unknown action {name!r}; the actions: {', '.join(sorted(ACTIONS))}")
        body = _Params(name, params)
        effect = action(self, body)
        self.steering.store.append_audit({"time": self._clock(), "caller": str(caller), "action": name,
                                          "params": dict(params), "effect": effect})
        return effect

    # -- the actions --------------------------------------------------------------------------

    def _pause(self, p: _Params) -> dict[str, Any]:
        p.done()
        self.steering.put(PAUSED, "1")
        return {"paused": True, "in_flight": self.frontier.in_flight}

    def _resume(self, p: _Params) -> dict[str, Any]:
        p.done()
        was = self.steering.delete(PAUSED)
        return {"paused": False, "was_paused": was}

    def _stop(self, p: _Params) -> dict[str, Any]:
        p.done()
        if self._on_stop is None:
            raise ControlError("stop: this frontier has no crawl loop to stop")
        self._on_stop()
        return {"stopping": True, "in_flight": self.frontier.in_flight}

    def _seeds(self, p: _Params) -> dict[str, Any]:
        urls = p.get("urls", list)
        force = p.get("force", bool, False)
        p.done()
        if not urls or len(urls) > MAX_SEEDS or not all(isinstance(u, str) for u in urls):
            raise ControlError(f"seeds: 'urls' must be a list of 1 to {MAX_SEEDS} URL strings")
        before = self._refused_seeds()
        added = self.frontier.add_seeds(urls, force=force)
        out = self._refused_seeds() - before
        return {"added": added, "out_of_scope": out, "seen": len(urls) - added - out}

    def _refused_seeds(self) -> int:
        """Seeds this process refused so far (invalid, out of scope, excluded: counted seed_<why>)."""
        reasons = self.frontier.counts.by_reason
        return sum(n for k, n in reasons.items() if k.startswith("seed_") or k == "invalid_seed")

    def _exclusion(self, p: _Params) -> tuple[str, str]:
        """The order field of an exclusion body: {"regex"} or {"host"}."""
        if p.has("regex") == p.has("host"):
            raise ControlError(f"{p.action}: give one of 'regex' or 'host'")
        if p.has("host"):
            name = EXCLUDE_HOST + p.host()
        else:
            regex = p.get("regex", str)
            if not regex or len(regex) > MAX_REGEX:
                raise ControlError(f"{p.action}: 'regex' must be 1 to {MAX_REGEX} characters")
            try:
                re.compile(regex)
            except re.error as e:
                raise ControlError(f"{p.action}: bad regex {regex!r}: {e}") from None
            name = EXCLUDE_RE + regex
        p.done()
        return name, name.split(":", 2)[2]

    def _exclude(self, p: _Params) -> dict[str, Any]:
        name, what = self._exclusion(p)
        self.steering.put(name, "")
        if name.startswith(EXCLUDE_HOST):
            return {"purged": sum(1 for host, _ in self.frontier.state.queued_urls() if host == what)}
        search = re.compile(what).search
        return {"purged": sum(1 for _, url in self.frontier.state.queued_urls() if search(url))}

    def _unexclude(self, p: _Params) -> dict[str, Any]:
        name, what = self._exclusion(p)
        if not self.steering.delete(name):
            raise ControlError(f"unexclude: no exclusion {what!r} is in force")
        return {"removed": 1}

    def _known_host(self, p: _Params) -> str:
        host = p.host()
        if not self.frontier.state.knows_host(host):
            raise ControlError(f"{p.action}: unknown host {host!r} (no URL of it was ever queued in this crawl)")
        return host

    def _block(self, p: _Params) -> dict[str, Any]:
        host = self._known_host(p)
        now = self._clock()
        if p.has("seconds") == p.has("until"):
            raise ControlError("block: give one of 'seconds' (from now) or 'until' (a Unix time)")
        if p.has("seconds"):
            until = now + p.seconds("seconds")
        else:
            until = float(p.get("until", (int, float)))
            if not math.isfinite(until) or not now < until <= now + MAX_SECONDS:
                raise ControlError(f"block: 'until' must be a Unix time in the next {MAX_SECONDS:g} s, "
                                   f"not {p.params['until']!r}")
        p.done()
        self.steering.put(BLOCK + host, repr(until))
        return {"host": host, "until": until}

    def _unblock(self, p: _Params) -> dict[str, Any]:
        return self._lift(p, BLOCK, "unblock", "blocked")

    def _delay(self, p: _Params) -> dict[str, Any]:
        host = self._known_host(p)
        seconds = p.seconds("seconds", zero=True)
        p.done()
        if seconds:
            self.steering.put(DELAY + host, repr(seconds))
        else:
            self.steering.delete(DELAY + host)
        return {"host": host, "seconds": seconds}

    def _retire(self, p: _Params) -> dict[str, Any]:
        host = self._known_host(p)
        p.done()
        self.steering.put(RETIRE + host, "")
        return {"host": host}

    def _unretire(self, p: _Params) -> dict[str, Any]:
        return self._lift(p, RETIRE, "unretire", "retired")

    def _lift(self, p: _Params, order: str, action: str, state: str) -> dict[str, Any]:
        """Delete a host's standing order (`order`: its key prefix); ControlError if the host has none."""
        host = p.host()
        p.done()
        if not self.steering.delete(order + host):
            raise ControlError(f"{action}: host {host!r} is not {state}")
        return {"host": host}

    def _release(self, p: _Params) -> dict[str, Any]:
        host = self._known_host(p)
        pattern = p.get("pattern", str)
        p.done()
        if not pattern.startswith("/") or any(c.isspace() for c in pattern):
            raise ControlError(f"release: a pattern starts with \"/\" and has no spaces (as the trap report "
                               f"names it), not {pattern!r}")
        if self.frontier.detector is None:
            raise ControlError("release: trap detection is off (traps.patterns and traps.soft_404 false): "
                               "no pattern is suspected")
        cleared = self.steering.release(host, pattern)
        self.steering.put(f"{RELEASE}{host} {pattern}", "")
        return {"host": host, "pattern": pattern, "cleared": cleared}

    def _checkpoint(self, p: _Params) -> dict[str, Any]:
        from frontier.console.checkpoint import CheckpointError, checkpoint  # LMDB's copy: only when asked for

        target = p.get("dir", str)
        p.done()
        if self._data_dir is None:
            raise ControlError("checkpoint: a Redis crawl lives on its server: back it up there (BGSAVE, replicas)")
        try:
            return checkpoint(self.frontier.seen.log, self._data_dir, Path(target))
        except CheckpointError as e:
            raise ControlError(f"checkpoint: {e}") from None


ACTIONS: dict[str, Callable[[Controls, _Params], dict[str, Any]]] = {
    "pause": Controls._pause, "resume": Controls._resume, "stop": Controls._stop, "seeds": Controls._seeds,
    "exclude": Controls._exclude, "unexclude": Controls._unexclude, "block": Controls._block,
    "unblock": Controls._unblock, "delay": Controls._delay, "retire": Controls._retire,
    "unretire": Controls._unretire, "release": Controls._release, "checkpoint": Controls._checkpoint,
}
