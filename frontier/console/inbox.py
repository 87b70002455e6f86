"""The action directory of a running crawl: DATA_DIR/actions/, read by the frontier loop (Heritrix's action
directory, for the crawl's own control actions).

    DATA_DIR/actions/0001-pause.json        {"action": "pause", "params": {}, "caller": "cron"}
    -> applied at the loop's next look (at most POLL seconds later), in name order, then moved to
    DATA_DIR/actions/done/0001-pause.json   the request with "answer": {"ok": true, "effect": {...}}
                                            or {"ok": false, "error": "one line"}

Write a request under another name (not ending in .json) and rename it: a half-written file is never read.
A request that is not a JSON object with a string "action" is answered with an error, like bad input to an
action. A request applied and not yet moved when the process dies is applied again by the next run (every
standing order is idempotent; seeds are checked against the seen-test again).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ACTIONS_DIR = "actions"
DONE_DIR = "done"
POLL = 0.5  # seconds between two looks at the directory
MAX_REQUEST = 16 << 20  # bytes of one request file read at most

Apply = Callable[[str, Any, str], dict[str, Any]]


class ActionInbox:
    """The action directory `path` (created if missing), answered by `poll(apply)`."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._done = path / DONE_DIR
        self._done.mkdir(parents=True, exist_ok=True)
        self._clock = clock
        self._next = 0.0

    def poll(self, apply: Apply) -> int:
        """Apply the waiting requests (at most every POLL seconds); returns how many were answered. `apply` is
        Controls.apply: a ValueError (ControlError) it raises is the request's error."""
        now = self._clock()
        if now < self._next:
            return 0
        self._next = now + POLL
        names = sorted(e.name for e in os.scandir(self.path) if e.name.endswith(".json") and e.is_file())
        for name in names:
            self._answer(name, apply)
        return len(names)

    def _answer(self, name: str, apply: Apply) -> None:
        path = self.path / name
        request: Any = None
        try:
            with open(path, "rb") as f:
                raw = f.read(MAX_REQUEST + 1)
            if len(raw) > MAX_REQUEST:
                raise ValueError(f"the request is over {MAX_REQUEST} bytes")
            request = json.loads(raw)
            if not isinstance(request, dict) or not isinstance(request.get("action"), str):
                raise ValueError('a request is a JSON object with a string "action"')
            caller = request.get("caller")
            effect = apply(request["action"], request.get("params", {}), f"actions/{name}" if not
                           isinstance(caller, str) else caller)
            answer: dict[str, Any] = {"ok": True, "effect": effect}
        except ValueError as e:  # bad JSON, a bad request, a ControlError: one line
            answer = {"ok": False, "error": str(e).splitlines()[0] if str(e) else type(e).__name__}
        tmp = self._done / f".{name}.tmp"
        tmp.write_text(json.dumps({**(request if isinstance(request, dict) else {}), "answer": answer}, sort_keys=True) + "\n")
        os.replace(tmp, self._done / name)
        path.unlink(missing_ok=True)
