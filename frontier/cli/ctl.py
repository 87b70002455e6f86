"""`frontier ctl ACTION ... (--data-dir DIR | --config crawl.yaml) [--json]`: steer a running crawl.

    frontier ctl pause --data-dir crawl-data
    frontier ctl exclude --regex '/calendar/' --data-dir crawl-data        -> purged: 1234
    frontier ctl seeds https://example.com/new --force --config crawl.yaml
    frontier ctl block example.com --seconds 600 --data-dir crawl-data

It posts the action to the crawl's console (POST /api/actions/ACTION, JSON body, the token as a Bearer header),
whose address and token the running crawl writes to DATA_DIR/console.json, and prints the effect. The crawl
checks the action (frontier.console.control) and answers one line when it refuses it. Exit status: 0 applied,
1 refused or no crawl answers, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from frontier.cli.prestart import read_config
from frontier.errors import ConfigError

HELP = "steer a running crawl: pause, resume, stop, seeds, exclude, block, delay, retire, release, checkpoint"
CONSOLE_FILE = "console.json"  # written by the crawl's console server (url, pid, token)
TIMEOUT = 60.0  # seconds an action may take (a checkpoint copies the whole state)



def _params_none(args: argparse.Namespace) -> dict[str, Any]:
    return {}


def _params_host(args: argparse.Namespace) -> dict[str, Any]:
    return {"host": args.host}


def _params_seeds(args: argparse.Namespace) -> dict[str, Any]:
    urls = list(args.urls)
    if args.input is not None:
        try:
            text = sys.stdin.read() if str(args.input) == "-" else args.input.read_text(encoding="utf-8")
        except OSError as e:
            args.parser.error(f"--input: cannot read {args.input}: {e.strerror}")
        urls += [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not urls:
        args.parser.error("give seed URLs, or --input FILE (one a line)")
    return {"urls": urls, "force": args.force}


def _params_exclusion(args: argparse.Namespace) -> dict[str, Any]:
    return {"regex": args.regex} if args.regex is not None else {"host": args.exclude_host}


def _params_block(args: argparse.Namespace) -> dict[str, Any]:
    return {"host": args.host, **({"seconds": args.seconds} if args.seconds is not None else {"until": args.until})}


def _seeds_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("urls", nargs="*", help="seed URLs")
    p.add_argument("--input", type=Path, help="a file of seed URLs, one a line (- for stdin)")
    p.add_argument("--force", action="store_true", help="queue them even if the crawl has seen them")


def _exclusion_arguments(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--regex", help="a Python regular expression searched in each canonical URL")
    which.add_argument("--host", dest="exclude_host", help="every URL of this host")


def _block_arguments(p: argparse.ArgumentParser) -> None:
    _host_arguments(p)
    until = p.add_mutually_exclusive_group(required=True)
    until.add_argument("--seconds", type=float, help="for this many seconds from now")
    until.add_argument("--until", type=float, help="until this Unix time")


def _host_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("host", help="the host, as name or name:port")


# action -> (help, add its arguments (None: none), the action's params from the parsed arguments)
ACTIONS: dict[str, tuple[str, Any, Any]] = {
    "pause": ("stop leasing; the fetches in flight finish, the crawl waits", None, _params_none),
    "resume": ("lease again after a pause", None, _params_none),
    "stop": ("stop the crawl gracefully, as SIGTERM does (a rerun resumes it)", None, _params_none),
    "seeds": ("add seed URLs (scope-checked; --force: past the seen-test)", _seeds_arguments, _params_seeds),
    "exclude": ("refuse URLs by regex or host from now on, and purge the queued ones", _exclusion_arguments,
                _params_exclusion),
    "unexclude": ("withdraw an exclusion", _exclusion_arguments, _params_exclusion),
    "block": ("lease nothing of a host until a time", _block_arguments, _params_block),
    "unblock": ("withdraw a block", _host_arguments, _params_host),
    "delay": ("make a host wait SECONDS after each fetch (0: withdraw)",
              lambda p: (_host_arguments(p), p.add_argument("seconds", type=float)),
              lambda a: {"host": a.host, "seconds": a.seconds}),
    "retire": ("fetch nothing more of a host in this run (its URLs stay queued)", _host_arguments, _params_host),
    "unretire": ("withdraw a retirement", _host_arguments, _params_host),
    "release": ("stop suspecting a trap pattern of a host",
                lambda p: (_host_arguments(p), p.add_argument("pattern", help='as the trap report names it, "/..."')),
                lambda a: {"host": a.host, "pattern": a.pattern}),
    "checkpoint": ("copy the crawl state to a new directory a crawl can resume from",
                   lambda p: p.add_argument("dir", type=Path, help="a directory that does not exist yet"),
                   lambda a: {"dir": str(a.dir.absolute())}),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, (help_text, add, _) in ACTIONS.items():
        p = actions.add_parser(name, help=help_text, description=help_text)
        if add is not None:
            add(p)
        where = p.add_mutually_exclusive_group(required=True)
        where.add_argument("--data-dir", type=Path, help="the running crawl's storage.data_dir")
        where.add_argument("--config", type=Path, help="the running crawl's crawl.yaml (its storage.data_dir)")
        p.add_argument("--json", action="store_true", help="print the crawl's JSON answer")
        p.add_argument("--cafile", type=Path, help="the CA (or self-signed certificate) of a console served with TLS")
        p.set_defaults(parser=p)


class NoCrawl(Exception):
    """No running crawl answers at the data dir (one line)."""


def console_of(data_dir: Path) -> dict[str, Any]:
    """The console.json a running crawl wrote into its data dir; NoCrawl if there is none or its process is gone."""
    path = data_dir / CONSOLE_FILE
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if not data_dir.is_dir():
            raise NoCrawl(f"{data_dir} is not a crawl's data dir (no such directory)") from None
        raise NoCrawl(f"no crawl is running in {data_dir} (no {CONSOLE_FILE}: start it with `frontier crawl`; "
                      "its console must be enabled)") from None
    except (OSError, ValueError) as e:
        raise NoCrawl(f"cannot read {path}: {e}") from None
    if not isinstance(info, dict) or not isinstance(info.get("url"), str):
        raise NoCrawl(f"{path} names no console address")
    pid = info.get("pid")
    if isinstance(pid, int) and not _alive(pid):
        raise NoCrawl(f"no crawl is running in {data_dir}: the one that wrote {CONSOLE_FILE} (pid {pid}) is gone")
    return info


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def post_action(info: dict[str, Any], action: str, params: dict[str, Any], cafile: Path | None = None,
                timeout: float = TIMEOUT) -> tuple[int, dict[str, Any]]:
    """POST one action to the console `info` names; (HTTP status, JSON answer). NoCrawl if nothing answers."""
    url = info["url"].rstrip("/") + f"/api/actions/{action}"
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if info.get("token"):
        headers["Authorization"] = f"Bearer {info['token']}"
    request = urllib.request.Request(url, data=json.dumps(params).encode(), headers=headers, method="POST")
    context = ssl.create_default_context(cafile=str(cafile)) if cafile is not None else None
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            return response.status, _json(response.read())
    except urllib.error.HTTPError as e:
        return e.code, _json(e.read())
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise NoCrawl(f"no crawl answers at {info['url']} ({reason})") from None


def _json(body: bytes) -> dict[str, Any]:
    try:
        answer = json.loads(body)
    except ValueError:
        return {"error": body.decode("utf-8", "replace").strip()[:200] or "an empty answer"}
    return answer if isinstance(answer, dict) else {"error": f"an unexpected answer: {answer!r}"[:200]}


def run(args: argparse.Namespace) -> int:
    params = ACTIONS[args.action][2](args)
    data_dir = args.data_dir
    if args.config is not None:
        try:
            data_dir = read_config(args.config).storage.data_dir
        except ConfigError as e:
            args.parser.error(f"{args.config}: {e}")
    try:
        status, answer = post_action(console_of(data_dir), args.action, params, args.cafile)
    except NoCrawl as e:
        print(f"frontier ctl: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(answer, indent=2, sort_keys=True))
    if status == 200 and answer.get("ok"):
        if not args.json:
            effect = answer.get("effect") or {}
            print(f"{args.action}: " + (", ".join(f"{k} {v}" for k, v in effect.items()) or "done"))
        return 0
    if status == 401:
        message = f"{args.action}: the console refused the token (401): is console.json from this crawl?"
    else:
        message = str(answer.get("error") or f"HTTP {status}")
    if not args.json:
        print(f"frontier ctl: {message}", file=sys.stderr)
    return 1
