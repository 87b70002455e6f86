"""run_frontier.py --log-level and --fresh, run for real on the mock web (served from a thread of the test).

--log-level: every process logs in one format on stderr ("<time> <process>[<pid>] LEVEL logger: message"),
at the level given. --fresh: deletes what the crawl created in its data dir, and nothing else, once confirmed
(--yes, or "y" typed on a terminal: a real pseudo-terminal here); refused without a terminal and without
--yes, for a path that is not a frontier data dir, and while a crawl runs on it.
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from crawlcmd import crawl_argv, crawl_env
from faultkit import mock_config, read_summary, wait_for, write_config
from frontier.cli.crawlinfo import lock_holder
from frontier.testing import MockWeb, SiteSpec

RUN_TIMEOUT = 60.0
LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (supervisor|frontier|worker-\d+)\[(\d+)\] "
                  r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: ")


@pytest.fixture(scope="module")
def web() -> Any:
    with MockWeb.serve_in_thread(SiteSpec(pages=120, hosts=2, seed=21)) as web:
        yield web


def run(config: Path, *args: str, stdin: Any = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    return subprocess.run(crawl_argv(config, *args), stdin=stdin, env=crawl_env(), capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, cwd=config.parent)


def crawl_config(web: Any, tmp_path: Path, data_dir: Path | None = None, **override: Any) -> Path:
    cfg = mock_config(web, data_dir or tmp_path / "data", workers={"processes": 1},
                      limits={"max_retries": 0}, **override)  # no retry backoff: a crawl of a second
    return write_config(tmp_path / "crawl.yaml", cfg)


def log_lines(stderr: str) -> list[tuple[str, str]]:
    """(process, level) of each log line; every stderr line of a crawl that went well is one."""
    out = []
    for line in stderr.splitlines():
        m = LINE.match(line)
        assert m, f"not in the log format: {line!r}"
        out.append((m[1], m[3]))
    return out


# -- --log-level ----------------------------------------------------------------------------------------------


def test_debug_logs_every_process_in_one_format(web: Any, tmp_path: Path) -> None:
    done = run(crawl_config(web, tmp_path), "--log-level", "debug")
    assert done.returncode == 0, done.stderr
    lines = log_lines(done.stderr)
    assert ("frontier", "DEBUG") in lines and ("worker-0", "DEBUG") in lines, done.stderr
    assert ("supervisor", "INFO") in lines and ("frontier", "INFO") in lines, done.stderr


def test_info_hides_debug_and_warning_hides_info(web: Any, tmp_path: Path) -> None:
    config = crawl_config(web, tmp_path)
    info = run(config, "--log-level", "info")
    assert info.returncode == 0, info.stderr
    levels = {level for _, level in log_lines(info.stderr)}
    assert "INFO" in levels and "DEBUG" not in levels, info.stderr
    quiet = run(config, "--log-level", "warning")  # a rerun of a finished crawl: nothing to warn about
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    default = run(config)
    assert default.returncode == 0 and default.stderr == "", default.stderr


def test_bad_log_level_is_a_usage_error(web: Any, tmp_path: Path) -> None:
    done = run(crawl_config(web, tmp_path), "--log-level", "loud")
    assert done.returncode == 2 and "--log-level" in done.stderr


# -- --fresh --------------------------------------------------------------------------------------------------


def crawled(web: Any, tmp_path: Path) -> tuple[Path, Path, int]:
    """A finished crawl: (config, data dir, pages fetched), with a file of the user's in the data dir."""
    config = crawl_config(web, tmp_path)
    data = tmp_path / "data"
    first = run(config)
    assert first.returncode == 0, first.stderr
    (data / "notes.txt").write_text("mine")
    return config, data, read_summary(data)["fetched"]


def crawl_files(data: Path) -> list[str]:
    return sorted(str(p.relative_to(data)) for p in data.rglob("*") if p.is_file())


def test_fresh_yes_starts_over_and_keeps_other_files(web: Any, tmp_path: Path) -> None:
    config, data, fetched = crawled(web, tmp_path)
    again = run(config, "--fresh", "--yes")
    assert again.returncode == 0, again.stderr
    assert "fresh start: deleted " in again.stdout and "state/data.mdb" in again.stdout
    summary = read_summary(data)
    assert summary["runs"] == 1 and summary["fetched"] == fetched  # the whole crawl again, not a resume
    assert (data / "notes.txt").read_text() == "mine"


def test_fresh_deletes_the_audit_log_and_answered_actions_and_keeps_a_pending_request(web: Any, tmp_path: Path) -> None:
    from frontier.cli.fresh import FreshStart
    from frontier.config import load_config

    config, data, _ = crawled(web, tmp_path)
    (data / "audit.jsonl").write_text('{"action": "pause"}\n')
    (data / "actions" / "done" / "1-pause.json").write_text("{}")
    (data / "actions" / "2-resume.json").write_text('{"action": "resume"}')
    plan = FreshStart.of(load_config({"seeds": [web.seed], "storage": {"data_dir": str(data)}}))
    assert {"audit.jsonl", "actions/done/1-pause.json"} <= {str(p.relative_to(data)) for p in plan.files}
    plan.run()
    assert sorted(p.name for p in (data / "actions").iterdir()) == ["2-resume.json"]
    assert not (data / "audit.jsonl").exists()


def test_fresh_without_a_terminal_needs_yes(web: Any, tmp_path: Path) -> None:
    config, data, _ = crawled(web, tmp_path)
    before = crawl_files(data)
    refused = run(config, "--fresh")
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and refused.stderr.startswith("frontier: --fresh would delete ")
    assert "add --yes" in refused.stderr and "state/data.mdb" in refused.stderr
    assert crawl_files(data) == before
    assert run(config, "--yes").returncode == 2  # --yes alone confirms nothing


@pytest.mark.parametrize("answer, deleted", [("n", False), ("y", True)])
def test_fresh_asks_on_a_terminal(web: Any, tmp_path: Path, answer: str, deleted: bool) -> None:
    config, data, fetched = crawled(web, tmp_path)
    before = crawl_files(data)
    controller, terminal = pty.openpty()
    try:
        os.write(controller, f"{answer}\n".encode())  # typed ahead: the terminal holds the line for input()
        done = run(config, "--fresh", stdin=terminal)
    finally:
        os.close(terminal)
        os.close(controller)
    assert "--fresh deletes " in done.stdout and "Delete? [y/N]" in done.stdout
    if deleted:
        assert done.returncode == 0, done.stderr
        assert read_summary(data)["runs"] == 1 and read_summary(data)["fetched"] == fetched
    else:
        assert done.returncode == 2 and done.stderr == "frontier: --fresh: not confirmed; nothing deleted\n"
        assert crawl_files(data) == before


def test_fresh_refuses_what_is_not_a_frontier_data_dir(web: Any, tmp_path: Path) -> None:
    other = tmp_path / "photos"
    other.mkdir()
    (other / "cat.jpg").write_bytes(b"\xff\xd8")
    (other / "summary.txt").write_text("not ours")
    done = run(crawl_config(web, tmp_path, other), "--fresh", "--yes")
    assert done.returncode == 2 and "is not a frontier data dir" in done.stderr and "nothing deleted" in done.stderr
    assert done.stderr.count("\n") == 1
    assert crawl_files(other) == ["cat.jpg", "summary.txt"]

    a_file = tmp_path / "file"
    a_file.write_text("keep")
    done = run(crawl_config(web, tmp_path, a_file), "--fresh", "--yes")
    assert done.returncode == 2 and "is not a directory" in done.stderr and a_file.read_text() == "keep"


def test_fresh_on_an_empty_or_new_data_dir_just_crawls(web: Any, tmp_path: Path) -> None:
    done = run(crawl_config(web, tmp_path, tmp_path / "new"), "--fresh")  # nothing to delete: nothing to confirm
    assert done.returncode == 0, done.stderr
    assert read_summary(tmp_path / "new")["fetched"] > 0


def test_fresh_refuses_a_data_dir_in_use(web: Any, tmp_path: Path) -> None:
    config, data, _ = crawled(web, tmp_path)
    slow = crawl_config(web, tmp_path, politeness={"delay": 0.5})
    holder = subprocess.Popen(crawl_argv(slow, "--fresh", "--yes"), env=crawl_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                              cwd=tmp_path)
    try:
        # the crawl, not its --fresh deleting the old files under the same lock (the lock alone raced once)
        log = data / "crawl.jsonl"
        wait_for(lambda: lock_holder(data / "state") is not None and log.exists() and log.stat().st_size > 0,
                 RUN_TIMEOUT, "the crawl holds its data dir")
        done = run(config, "--fresh", "--yes")
        assert done.returncode == 2 and "in use by a running crawl" in done.stderr, done.stderr
        assert (data / "state" / "data.mdb").exists() and holder.poll() is None
    finally:
        holder.terminate()
        assert holder.wait(RUN_TIMEOUT) in (0, 130)
