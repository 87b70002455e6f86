"""The console's page, as the crawl benchmark plays it: a poller of /api/snapshot and /api/hosts every second.

    with ConsolePoller(data_dir) as poller:   # a thread: waits for data_dir/console.json, then polls
        ... the crawl runs ...
    poller.polls, poller.errors               # requests answered 200, and the others

It reads the address and the token from console.json (frontier.console.server), as `frontier ctl` does, and
asks what the page asks each second: the snapshot and the first page of the hosts table sorted by pages fetched.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from pathlib import Path

POLL_SECONDS = 1.0
PATHS = ("api/snapshot", "api/hosts?sort=fetched&desc=1&limit=100")


class ConsolePoller:
    """Polls a running crawl's console every POLL_SECONDS until closed (see the module docstring)."""

    def __init__(self, data_dir: Path, interval: float = POLL_SECONDS) -> None:
        self.data_dir = data_dir
        self.interval = interval
        self.polls = 0
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="console-poller", daemon=True)

    def __enter__(self) -> "ConsolePoller":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10.0)

    def _target(self) -> tuple[str, str] | None:
        try:
            info = json.loads((self.data_dir / "console.json").read_text())
            return str(info["url"]), str(info["token"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _run(self) -> None:
        target = None
        while not self._stop.is_set():
            target = target or self._target()
            if target is not None:
                url, token = target
                for path in PATHS:
                    request = urllib.request.Request(url + path, headers={"Authorization": f"Bearer {token}"})
                    try:
                        with urllib.request.urlopen(request, timeout=5) as response:
                            response.read()
                        self.polls += 1
                    except (urllib.error.URLError, OSError):  # the crawl ended, or restarted on a new port
                        self.errors += 1
                        target = None
                        break
            self._stop.wait(self.interval if target is not None else 0.05)
