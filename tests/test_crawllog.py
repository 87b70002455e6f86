"""The JSONL crawl log (appends across runs; a torn line never swallows the next record), and the run
history: one runs.jsonl line per run, a summary.json that adds the runs up."""

from __future__ import annotations

import json
from pathlib import Path

from frontier.crawl.log import CrawlLog, RunHistory


def test_appends_one_json_object_per_line(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "crawl.jsonl"
    with CrawlLog(path) as log:
        log.write({"url": "http://a/", "status": "ok"})
        log.write({"url": "http://b/", "status": "fail", "reason": "timeout"})
    with CrawlLog(path) as log:
        log.write({"url": "http://c/", "status": "ok"})
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["url"] for r in records] == ["http://a/", "http://b/", "http://c/"]


def test_a_torn_last_line_stays_alone(tmp_path: Path) -> None:
    path = tmp_path / "crawl.jsonl"
    path.write_text('{"url":"http://a/"}\n{"url":"http://b/","sta')  # a crash cut the last write
    with CrawlLog(path) as log:
        log.write({"url": "http://c/"})
    lines = path.read_text().splitlines()
    assert lines[1] == '{"url":"http://b/","sta'
    assert json.loads(lines[2]) == {"url": "http://c/"}


# -- run history: runs.jsonl and the cumulative summary.json -------------------------------------------


def segment(code: int, fetched: int, attempts: int, reasons: dict[str, int], *, queued: int = 0) -> dict:
    """What a frontier process reports when it stops (see RunHistory.record)."""
    return {"exit_code": code, "done": code == 0, "elapsed_seconds": 2.0, "fetched": fetched, "attempts": attempts,
            "reasons": reasons, "state": {"fetched": None, "attempts": None, "queued": queued, "crawl_log": "x"}}


def test_two_runs_are_two_lines_and_the_summary_adds_them_up(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    history.record("run-1", 1_700_000_000.0, segment(130, 40, 42, {"ok": 40, "timeout": 2}, queued=9), final=True)
    summary = history.record("run-2", 1_700_000_100.0, segment(0, 9, 9, {"ok": 8, "http_404": 1}), final=True)

    runs = history.runs()
    assert [(r["run_id"], r["exit_code"], r["done"], r["fetched"], r["attempts"]) for r in runs] == [
        ("run-1", 130, False, 40, 42), ("run-2", 0, True, 9, 9)]
    assert runs[0]["reasons"] == {"ok": 40, "timeout": 2} and runs[1]["reasons"] == {"ok": 8, "http_404": 1}
    assert runs[0]["started_at"] == "2023-11-14T22:13:20+00:00" and runs[0]["ended_at"] >= runs[0]["started_at"]
    assert summary == history.summary()
    assert summary["runs"] == 2 and summary["done"] is True and summary["exit_code"] == 0
    assert summary["reasons"] == {"ok": 48, "timeout": 2, "http_404": 1}  # summed over the runs
    assert summary["elapsed_seconds"] == 4.0 and summary["queued"] == 0
    assert summary["last_run"] == runs[1]


def test_a_restart_within_a_run_is_one_line(tmp_path: Path) -> None:
    """The supervisor restarts the frontier process after a dead worker: two segments, one run."""
    history = RunHistory(tmp_path)
    history.record("run-1", 1_700_000_000.0, segment(130, 10, 11, {"ok": 10, "worker_died": 1}), final=False)
    assert history.runs() == []  # the run goes on
    summary = history.record("run-1", 1_700_000_000.0, segment(0, 5, 5, {"ok": 5}), final=True)
    (run,) = history.runs()
    assert (run["fetched"], run["attempts"], run["restarts"], run["exit_code"]) == (15, 16, 1, 0)
    assert run["reasons"] == {"ok": 15, "worker_died": 1} == summary["reasons"]
    assert summary["runs"] == 1


def test_the_supervisor_closes_a_run_its_frontier_could_not(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    history.record("run-1", 1_700_000_000.0, segment(0, 3, 3, {"ok": 3}), final=True)
    history.close_run("run-1", 1_700_000_000.0, 0, "not needed")  # already recorded: nothing added
    history.record("run-2", 1_700_000_100.0, segment(130, 4, 4, {"ok": 4}), final=False)  # then killed
    history.close_run("run-2", 1_700_000_100.0, 1, "the frontier process was killed by SIGKILL")
    history.close_run("run-3", 1_700_000_200.0, 1, "killed before it recorded anything")
    runs = history.runs()
    assert [(r["run_id"], r["exit_code"]) for r in runs] == [("run-1", 0), ("run-2", 1), ("run-3", 1)]
    assert runs[1]["fetched"] == 4 and runs[1]["note"] == "the frontier process was killed by SIGKILL"
    assert "fetched" not in runs[2]


def test_a_torn_runs_line_is_skipped_and_kept_alone(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    history.runs_path.write_text('{"run_id":"run-0","exit')  # a crash cut the last write
    history.record("run-1", 1_700_000_000.0, segment(0, 1, 1, {"ok": 1}), final=True)
    assert [r["run_id"] for r in history.runs()] == ["run-1"]
    assert history.runs_path.read_text().splitlines()[0] == '{"run_id":"run-0","exit'
