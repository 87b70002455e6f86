"""The action directory (frontier.console.inbox): requests applied in name order, each answered in done/, bad
files answered with one line, half-written files never read. Its use by a real crawl: tests/test_console_crawl.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from frontier.console.control import ControlError
from frontier.console.inbox import ActionInbox


def test_requests_are_applied_in_name_order_and_answered(tmp_path: Path) -> None:
    applied: list[tuple[str, Any, str]] = []

    def apply(name: str, params: Any, caller: str) -> dict[str, Any]:
        applied.append((name, params, caller))
        if name == "exclude":
            raise ControlError("exclude: bad regex '(': missing ), unterminated subpattern at position 0")
        return {"done": name}

    inbox = ActionInbox(tmp_path / "actions")
    (tmp_path / "actions" / "2-resume.json").write_text(json.dumps({"action": "resume"}))
    (tmp_path / "actions" / "1-pause.json").write_text(json.dumps({"action": "pause", "params": {}, "caller": "cron"}))
    (tmp_path / "actions" / "3-bad.json").write_text("{not json")
    (tmp_path / "actions" / "4-list.json").write_text("[1, 2]")
    (tmp_path / "actions" / "5-exclude.json").write_text(json.dumps({"action": "exclude", "params": {"regex": "("}}))
    (tmp_path / "actions" / ".6-half-written.json.tmp").write_text("{")
    assert inbox.poll(apply) == 5
    assert applied == [("pause", {}, "cron"), ("resume", {}, "actions/2-resume.json"),
                       ("exclude", {"regex": "("}, "actions/5-exclude.json")]
    answers = {p.name: json.loads(p.read_text())["answer"] for p in (tmp_path / "actions" / "done").iterdir()}
    assert answers["1-pause.json"] == {"ok": True, "effect": {"done": "pause"}}
    assert answers["3-bad.json"]["ok"] is False and answers["3-bad.json"]["error"].startswith("Expecting property")
    assert answers["4-list.json"] == {"ok": False, "error": 'a request is a JSON object with a string "action"'}
    assert answers["5-exclude.json"]["error"].startswith("exclude: bad regex")
    assert sorted(p.name for p in (tmp_path / "actions").iterdir()) == [".6-half-written.json.tmp", "done"]


def test_the_directory_is_looked_at_once_per_poll_interval(tmp_path: Path) -> None:
    now = [0.0]
    inbox = ActionInbox(tmp_path / "actions", clock=lambda: now[0])
    assert inbox.poll(lambda *a: {}) == 0
    (tmp_path / "actions" / "1.json").write_text(json.dumps({"action": "pause"}))
    now[0] = 0.1
    assert inbox.poll(lambda *a: {}) == 0  # within POLL of the last look
    now[0] = 1.0
    assert inbox.poll(lambda *a: {}) == 1
