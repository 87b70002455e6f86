"""`frontier ctl` (frontier.cli.ctl): its arguments, its errors when no crawl answers, and its exchange with a
console that keeps the HTTP contract (POST /api/actions/NAME, Bearer token, 200 {"ok", "effect"} / 400
{"error"} / 401), run as `python -m frontier ctl` in a subprocess.

The console here is the contract's action endpoint in a few lines of aiohttp on loopback, over a real Frontier
(LMDB) and real Controls; the crawl's own console server is tested with the server.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from crawlcmd import crawl_env
from frontier.__main__ import build_parser
from frontier.cli.ctl import ACTIONS
from frontier.config import load_config
from frontier.console.control import ControlError, Controls
from frontier.crawl.scheduler import Frontier

TOKEN = "t0ken-for-the-test"


def params_of(*argv: str) -> dict[str, Any]:
    args = build_parser().parse_args(["ctl", *argv])
    return ACTIONS[args.action][2](args)


@pytest.mark.parametrize("argv,params", [
    (["pause", "--data-dir", "d"], {}),
    (["resume", "--config", "c.yaml"], {}),
    (["stop", "--data-dir", "d"], {}),
    (["seeds", "http://a.test/1", "http://a.test/2", "--data-dir", "d"],
     {"urls": ["http://a.test/1", "http://a.test/2"], "force": False}),
    (["seeds", "http://a.test/1", "--force", "--data-dir", "d"], {"urls": ["http://a.test/1"], "force": True}),
    (["exclude", "--regex", "/cal/", "--data-dir", "d"], {"regex": "/cal/"}),
    (["exclude", "--host", "a.test", "--data-dir", "d"], {"host": "a.test"}),
    (["unexclude", "--regex", "/cal/", "--data-dir", "d"], {"regex": "/cal/"}),
    (["block", "a.test", "--seconds", "60", "--data-dir", "d"], {"host": "a.test", "seconds": 60.0}),
    (["block", "a.test", "--until", "1900000000", "--data-dir", "d"], {"host": "a.test", "until": 1.9e9}),
    (["unblock", "a.test", "--data-dir", "d"], {"host": "a.test"}),
    (["delay", "a.test", "2.5", "--data-dir", "d"], {"host": "a.test", "seconds": 2.5}),
    (["retire", "a.test", "--data-dir", "d"], {"host": "a.test"}),
    (["unretire", "a.test", "--data-dir", "d"], {"host": "a.test"}),
    (["release", "a.test", "/cal/*", "--data-dir", "d"], {"host": "a.test", "pattern": "/cal/*"}),
])
def test_each_action_s_arguments_make_its_body(argv: list[str], params: dict[str, Any]) -> None:
    assert params_of(*argv) == params


def test_a_checkpoint_directory_is_sent_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert params_of("checkpoint", "cp", "--data-dir", "d") == {"dir": str(tmp_path / "cp")}


def test_seeds_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "seeds.txt").write_text("# new hosts\nhttp://a.test/1\n\nhttp://a.test/2\n")
    assert params_of("seeds", "--input", str(tmp_path / "seeds.txt"), "--data-dir", "d") == \
        {"urls": ["http://a.test/1", "http://a.test/2"], "force": False}


def ctl(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "frontier", "ctl", *argv], capture_output=True, text=True,
                          timeout=60, cwd=cwd, env=crawl_env())


@pytest.mark.parametrize("argv,message", [
    (["block", "a.test", "--data-dir", "d"], "one of the arguments --seconds --until is required"),
    (["exclude", "--data-dir", "d"], "one of the arguments --regex --host is required"),
    (["pause"], "one of the arguments --data-dir --config is required"),
    (["pause", "--data-dir", "d", "--config", "c"], "not allowed with argument"),
    (["delay", "a.test", "soon", "--data-dir", "d"], "invalid float value: 'soon'"),
    (["nosuch", "--data-dir", "d"], "invalid choice: 'nosuch'"),
    (["seeds", "--data-dir", "d"], "give seed URLs, or --input FILE"),
])
def test_bad_arguments_exit_2_with_one_message(argv: list[str], message: str) -> None:
    done = ctl(*argv)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def test_no_crawl_running_is_one_line_and_status_1(tmp_path: Path) -> None:
    cases = {"missing": (tmp_path / "nowhere", "is not a crawl's data dir"),
             "no console": (tmp_path / "idle", "no crawl is running in"),
             "stale": (tmp_path / "stale", "(pid 2147483646) is gone"),
             "closed port": (tmp_path / "closed", "no crawl answers at http://127.0.0.1:9/")}
    (tmp_path / "idle").mkdir()
    (tmp_path / "stale").mkdir()
    (tmp_path / "stale" / "console.json").write_text(json.dumps({"url": "http://127.0.0.1:9/", "pid": 2147483646,
                                                                 "token": "x"}))
    (tmp_path / "closed").mkdir()
    (tmp_path / "closed" / "console.json").write_text(json.dumps({"url": "http://127.0.0.1:9/", "pid": os.getpid(),
                                                                  "token": "x"}))
    for name, (data_dir, message) in cases.items():
        done = ctl("pause", "--data-dir", str(data_dir))
        assert done.returncode == 1, name
        assert message in done.stderr and done.stderr.count("\n") == 1, (name, done.stderr)


class ContractConsole:
    """The contract's action endpoint over `controls`, served from a thread on an ephemeral loopback port."""

    def __init__(self, controls: Controls) -> None:
        self.controls = controls
        self.lock = threading.Lock()
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    async def action(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return web.json_response({"error": "a token is needed"}, status=401)
        try:
            body = await request.json()
            with self.lock:
                effect = self.controls.apply(request.match_info["name"], body, "test-console")
        except (ControlError, ValueError) as e:
            return web.json_response({"error": str(e)}, status=400)
        return web.json_response({"ok": True, "effect": effect})

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_post("/api/actions/{name}", self.action)
        self.runner = web.AppRunner(app)
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        self.loop.run_forever()

    def __enter__(self) -> "ContractConsole":
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


@pytest.fixture
def console(tmp_path: Path) -> Iterator[tuple[Path, Frontier, ContractConsole]]:
    cfg = load_config({"seeds": ["http://a.test/"], "storage": {"data_dir": str(tmp_path / "data")},
                       "scope": {"allowed_hosts": ["a.test"]}, "traps": {"patterns": False, "soft_404": False},
                       "politeness": {"delay": 0.0, "obey_robots": False}})
    frontier = Frontier.from_config(cfg)
    try:
        frontier.add_seeds(["http://a.test/", "http://a.test/cal/1", "http://a.test/cal/2"])
        with ContractConsole(Controls.from_config(frontier, cfg)) as server:
            info = {"url": f"http://127.0.0.1:{server.port}/", "pid": os.getpid(), "token": TOKEN}
            (tmp_path / "data" / "console.json").write_text(json.dumps(info))
            yield tmp_path / "data", frontier, server
    finally:
        frontier.close()


def test_ctl_applies_an_action_and_prints_its_effect(console: tuple[Path, Frontier, ContractConsole]) -> None:
    data, frontier, server = console
    done = ctl("exclude", "--regex", "/cal/", "--data-dir", str(data))
    assert (done.returncode, done.stdout, done.stderr) == (0, "exclude: purged 2\n", "")
    done = ctl("pause", "--data-dir", str(data), "--json")
    assert done.returncode == 0 and json.loads(done.stdout) == {"ok": True, "effect": {"paused": True, "in_flight": 0}}
    with server.lock:
        assert frontier.lease(10) == [] and [r["action"] for r in server.controls.audit(5)] == ["exclude", "pause"]


def test_ctl_says_the_crawl_s_refusal_in_one_line(console: tuple[Path, Frontier, ContractConsole]) -> None:
    data, _, _ = console
    done = ctl("exclude", "--regex", "(", "--data-dir", str(data))
    assert done.returncode == 1
    assert done.stderr == "frontier ctl: exclude: bad regex '(': missing ), unterminated subpattern at position 0\n"
    done = ctl("block", "nowhere.test", "--seconds", "5", "--data-dir", str(data))
    assert done.returncode == 1 and "unknown host 'nowhere.test'" in done.stderr


def test_ctl_with_a_wrong_token_is_refused(console: tuple[Path, Frontier, ContractConsole]) -> None:
    data, frontier, _ = console
    info = json.loads((data / "console.json").read_text())
    (data / "console.json").write_text(json.dumps({**info, "token": "wrong"}))
    done = ctl("pause", "--data-dir", str(data))
    assert done.returncode == 1 and "refused the token (401)" in done.stderr
    assert not frontier.steering.paused  # type: ignore[union-attr]
