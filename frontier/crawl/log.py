"""The crawl's own records in JSON: the crawl log, the run history and the cumulative summary.

    CrawlLog(path)          crawl.jsonl: one line per fetch (and per URL skipped without one), appended across runs
    RunHistory(data_dir)    runs.jsonl: one line per run; summary.json: the whole crawl so far

A run is one invocation of run_frontier.py; it may take several frontier processes (the supervisor
restarts the frontier when a worker dies). Each frontier process that stops cleanly adds what it
did (a "segment") to summary.json; the last one of a run also appends the run's line to runs.jsonl.
summary.json (see `RunHistory.record` for every key):

    done, exit_code            of the last run; done: nothing is left to fetch (exit 0, or 4: only
                               unreachable seeds are left, which a rerun tries again)
    runs                       how many runs wrote to this file
    fetched, attempts          the site's pages fetched (an HTTP response) and fetch attempts, crawl-wide
                               (counted in the crawl state, so exact even across crashes; with Redis: by
                               every instance)
    elapsed_seconds, outcomes, own_requests, reasons
                               summed over every frontier process of this data dir that stopped cleanly
                               (this instance's): outcomes of the site's page attempts; the crawler's own
                               requests (robots.txt, soft_404_probe, sitemap); reasons: those and every link
                               refused
    queued, in_flight, hosts, seen, unreachable_seeds, crawl_log, long_crawl_delay
                               the state at the last stop; long_crawl_delay: politeness.long_crawl_delay
                               (policy), max_crawl_delay and the hosts whose robots.txt Crawl-delay is over it
    last_run                   the last run's line of runs.jsonl (so far)

A run line: run_id, started_at, ended_at (ISO 8601, UTC), exit_code, done, elapsed_seconds, fetched
and attempts of this run (by this instance), pages_per_second, outcomes, own_requests and reasons of this
run, restarts (frontier restarts after a dead worker). A frontier process killed outright (kill -9, OOM)
adds nothing: its segment's counts and elapsed time are lost (the crawl-wide fetched and attempts are not:
they come from the crawl state), and the
supervisor appends the run's line itself (`RunHistory.close_run`) with what summary.json holds.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

SUMMARY_NAME = "summary.json"
RUNS_NAME = "runs.jsonl"
COUNTS = ("outcomes", "own_requests", "reasons")  # a segment's counters, summed per run and over the crawl
_LINE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # json.dumps would build one per record


class CrawlLog:
    """Append-only JSON lines; `flush()` after each batch so a kill loses at most the batch in progress."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._file = open(self.path, "a", encoding="utf-8", buffering=1 << 16)
        if self._file.tell() and not _ends_with_newline(self.path):
            self._file.write("\n")  # a line torn by a crash stays alone, never glued to this run's first
        self.lines = 0

    def write(self, record: dict[str, object]) -> None:
        self._file.write(_LINE.encode(record) + "\n")
        self.lines += 1

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        """Flush and close. Idempotent."""
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> "CrawlLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).isoformat(timespec="seconds")


def _add_counts(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return dict(Counter(a) + Counter(b))


def other_reasons(counts: dict[str, Any]) -> dict[str, int]:
    """A summary's (or a run's) reasons that are neither page outcomes nor own requests already counted
    (robots_fetched, soft_404_probe): links refused, robots.txt failures and sitemap results."""
    own = counts.get("own_requests", {})
    shown = Counter(counts.get("outcomes", {})) + Counter(
        {"robots_fetched": own.get("robots.txt", 0), "soft_404_probe": own.get("soft_404_probe", 0)})
    return dict(Counter(counts.get("reasons", {})) - shown)


class RunHistory:
    """summary.json and runs.jsonl of one data dir. Written by one process at a time (the data dir's lock
    holder, or the supervisor after it), so a plain read-modify-replace is enough."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.summary_path = Path(data_dir) / SUMMARY_NAME
        self.runs_path = Path(data_dir) / RUNS_NAME

    def summary(self) -> dict[str, Any]:
        """The current summary.json; {} when there is none (or it cannot be read)."""
        try:
            data = json.loads(self.summary_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def runs(self) -> list[dict[str, Any]]:
        """The lines of runs.jsonl that parse (a torn last line is skipped)."""
        out = []
        try:
            lines = self.runs_path.read_text(encoding="utf-8").splitlines()
        except OSError:
            return out
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def record(self, run_id: str, started_at: float, segment: dict[str, Any], *, final: bool) -> dict[str, Any]:
        """Add one frontier process's segment to summary.json; `final`: the run ends, append its line.

        `segment`: exit_code, done, elapsed_seconds, fetched, attempts, outcomes, own_requests, reasons (this
        process's), and
        `state` (the crawl's fetched and attempts totals, queued, in_flight, hosts, seen,
        unreachable_seeds, crawl_log). Returns the new summary.
        """
        previous = self.summary()
        prior = previous.get("last_run") or {}
        new_run = prior.get("run_id") != run_id
        if new_run:
            prior = {}
        elapsed = round(prior.get("elapsed_seconds", 0.0) + segment["elapsed_seconds"], 3)
        fetched = prior.get("fetched", 0) + segment["fetched"]
        last = {
            "run_id": run_id,
            "started_at": _iso(started_at),
            "ended_at": _iso(time.time()),
            "exit_code": segment["exit_code"],
            "done": segment["done"],
            "elapsed_seconds": elapsed,
            "fetched": fetched,
            "attempts": prior.get("attempts", 0) + segment["attempts"],
            "pages_per_second": round(fetched / elapsed, 2) if elapsed > 0 else 0.0,
            "restarts": prior.get("restarts", 0) + (0 if final else 1),
            **{key: _add_counts(prior.get(key, {}), segment.get(key, {})) for key in COUNTS},
        }
        summary = {
            "done": last["done"],
            "exit_code": last["exit_code"],
            "runs": previous.get("runs", 0) + (1 if new_run else 0),
            **segment["state"],
            "elapsed_seconds": round(previous.get("elapsed_seconds", 0.0) + segment["elapsed_seconds"], 3),
            **{key: _add_counts(previous.get(key, {}), segment.get(key, {})) for key in COUNTS},
            "last_run": last,
        }
        self._write_summary(summary)
        if final:
            self._append_run(last)
        return summary

    def close_run(self, run_id: str, started_at: float, exit_code: int, why: str) -> None:
        """The supervisor's line for a run whose last frontier process could not write it (killed)."""
        if any(run.get("run_id") == run_id for run in self.runs()[-1:]):
            return
        last = self.summary().get("last_run") or {}
        known = last if last.get("run_id") == run_id else {}
        self._append_run({**known, "run_id": run_id, "started_at": _iso(started_at), "ended_at": _iso(time.time()),
                          "exit_code": exit_code, "done": False, "note": why})

    def _write_summary(self, summary: dict[str, Any]) -> None:
        tmp = self.summary_path.with_suffix(".json.tmp")
        try:
            tmp.write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
            tmp.replace(self.summary_path)
        except BaseException:
            tmp.unlink(missing_ok=True)  # e.g. a full disk: the previous summary stands, whole
            raise

    def _append_run(self, line: dict[str, Any]) -> None:
        with open(self.runs_path, "a+", encoding="utf-8") as f:
            if f.tell() and not _ends_with_newline(self.runs_path):
                f.write("\n")  # a line torn by a crash stays alone
            f.write(json.dumps(line, ensure_ascii=False, separators=(",", ":"), default=str) + "\n")
