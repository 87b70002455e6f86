"""`python -m frontier recrawl`: fetch some URLs of a crawl once more, in the next run or the running one.

    python -m frontier recrawl --config crawl.yaml URL ...
    python -m frontier recrawl --config crawl.yaml --input urls.txt      (one URL a line; - for stdin; .gz)

Each URL is canonicalised with the crawl's rules and checked against its scope; a malformed or out-of-scope
line is skipped and named on stderr (one line each, the first MAX_REPORTED), with a count at the end. What
"recrawl" does to a URL (frontier.state.base, `Link.recrawl`): fetched before (or given up) -> queued
again, once; queued now (or in flight) -> left alone, it is fetched anyway; never seen -> queued like a
seed. The URL stays in the seen-set throughout, so a link to it while it is queued again does not queue it
a second time. Nothing is forgotten in the fingerprint log: "forget" means forgetting that it was done.

An LMDB crawl's data dir belongs to the one process that runs it, so this command does not open it: it
writes the URLs as spool files into DATA_DIR/recrawl/ (written to a hidden temporary name, fsynced, renamed
to `<time_ns>-<pid>-<n>.urls`, then the directory fsynced: a file either is there whole or not at all), at
most SPOOL_CHUNK URLs a file. The crawl applies them (frontier.state.lmdb) when it opens the data dir and,
while it runs, about once a second: each file in one LMDB transaction that also records the file's name as
applied, then the file is deleted. A kill -9 of either side at any point therefore neither loses a request
nor applies one twice. A Redis crawl has no data dir: the command commits the URLs to the server directly,
as any frontier instance would (the running instances lease them at once).

Exit status: 0 every URL given was queued for recrawl; 1 some lines were skipped (malformed or out of
scope), the others were queued; 2 bad arguments, an unreadable input or config, not a crawl's data dir
(nothing queued); 3 the disk is full (nothing queued from the file being written).
"""

from __future__ import annotations

import argparse
import errno
import gzip
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from frontier.state.recrawl_spool import SPOOL_CHUNK, spool_dir, write_spool

MAX_REPORTED = 20  # skipped lines named one by one on stderr; the rest are counted

EXIT_OK, EXIT_SKIPPED, EXIT_USAGE, EXIT_DISK_FULL = 0, 1, 2, 3
HELP = "queue URLs of a crawl to be fetched once more (the next run, or the running crawl within a second)"


# -- the command ----------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("urls", nargs="*", metavar="URL", help="URLs to fetch again")
    parser.add_argument("--config", type=Path, required=True, help="the crawl's crawl.yaml")
    parser.add_argument("--input", "-i", action="append", default=[], metavar="FILE",
                        help="read URLs from FILE, one a line (- for stdin; .gz is read as gzip); repeatable")


def _input_lines(args: argparse.Namespace) -> Iterator[tuple[str, int, bytes]]:
    """(source, line number, raw line) of the URL arguments, then of each --input file. FrontierError naming the
    file if one cannot be read to its end (missing, unreadable, a truncated or foreign .gz)."""
    from frontier.errors import FrontierError

    for i, url in enumerate(args.urls, 1):
        yield "argument", i, url.encode("utf-8", "surrogateescape")
    for name in args.input:
        f: BinaryIO | None = None
        try:
            if name == "-":
                f = sys.stdin.buffer
            else:
                f = open(name, "rb")  # noqa: SIM115 - closed below
                if name.endswith(".gz"):
                    f = gzip.GzipFile(fileobj=f)  # type: ignore[assignment]
            for number, line in enumerate(f, 1):  # type: ignore[arg-type]
                yield name, number, line
        except (OSError, EOFError, zlib.error) as e:
            raise FrontierError(f"cannot read {name}: {getattr(e, 'strerror', None) or e}") from None
        finally:
            if f is not None and f is not sys.stdin.buffer:
                f.close()


class _Report:
    """Skipped lines: the first MAX_REPORTED named on stderr, all counted by why."""

    def __init__(self) -> None:
        self.counts = {"malformed": 0, "out of scope": 0}
        self.shown = 0

    def skip(self, why: str, source: str, number: int, line: str, detail: str) -> None:
        self.counts[why] += 1
        if self.shown < MAX_REPORTED:
            self.shown += 1
            where = f"{source}:{number}" if source != "argument" else f"argument {number}"
            print(f"frontier: recrawl: {where}: {why} ({detail}), skipped: {line[:200]!r}", file=sys.stderr)

    @property
    def skipped(self) -> int:
        return sum(self.counts.values())


def collect(args: argparse.Namespace, cfg: Any) -> tuple[list[str], _Report, int]:
    """The canonical, in-scope URLs of the input, each once; the skipped lines; repeats left out."""
    from frontier.errors import InvalidURL
    from frontier.url.canonical import canonicalize
    from frontier.url.scope import Scope

    scope = Scope.from_config(cfg)
    report = _Report()
    urls: dict[str, None] = {}
    repeats = 0
    for source, number, raw in _input_lines(args):
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError as e:
            report.skip("malformed", source, number, raw.decode("utf-8", "replace").strip(), f"not UTF-8: {e.reason}")
            continue
        if not line or line.startswith("#"):
            continue
        try:
            canon = canonicalize(line, rules=cfg.canonical)
        except InvalidURL as e:
            report.skip("malformed", source, number, line, str(e))
            continue
        reason = scope.check(canon)
        if reason:
            report.skip("out of scope", source, number, line, f"{reason}: {scope.rule_of(reason)}")
            continue
        if canon in urls:
            repeats += 1
        urls[canon] = None
    return list(urls), report, repeats


def run(args: argparse.Namespace) -> int:
    from frontier.cli.ops import read_config
    from frontier.errors import ConfigError, FrontierError

    try:
        cfg = read_config(args.config)
    except ConfigError as e:
        args.parser.error(f"{args.config}: {e}")
    if not args.urls and not args.input:
        args.parser.error("give URLs or --input FILE")
    try:
        urls, report, repeats = collect(args, cfg)
    except FrontierError as e:
        args.parser.error(f"{e}; nothing queued")
    if cfg.storage.backend == "redis":
        try:
            where = _commit_to_redis(cfg, urls)
        except FrontierError as e:
            args.parser.error(f"{e}; nothing queued")
    else:
        try:
            where = _spool(args, cfg, urls)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                print(f"frontier: recrawl: {spool_dir(cfg.storage.data_dir)}: the disk is full ({e.strerror}); "
                      "nothing queued from the file being written", file=sys.stderr)
                return EXIT_DISK_FULL
            args.parser.error(f"cannot write to {spool_dir(cfg.storage.data_dir)}: {e.strerror}")
    skipped = ", ".join(f"{n:,} {why}" for why, n in report.counts.items() if n)
    print(f"recrawl: {len(urls):,} URL{'' if len(urls) == 1 else 's'} queued to fetch again {where}"
          + (f"; skipped: {skipped}" if skipped else "") + (f"; {repeats:,} repeated" if repeats else ""))
    return EXIT_SKIPPED if report.skipped else EXIT_OK


def _spool(args: argparse.Namespace, cfg: Any, urls: list[str]) -> str:
    from frontier.cli.crawlinfo import env_dir, lock_holder
    from frontier.errors import StorageError

    data_dir = cfg.storage.data_dir
    try:
        env = env_dir(data_dir)
    except StorageError as e:
        args.parser.error(f"{e} (a crawl's data dir is made by its first run)")
    if urls:
        write_spool(data_dir, urls)
    holder = lock_holder(env)
    if holder is not None:
        return f"by the running crawl (pid {holder}), within about a second"
    return "by the next run of the crawl"


def _commit_to_redis(cfg: Any, urls: list[str]) -> str:
    from frontier.crawl.scheduler import crawl_policy
    from frontier.state.base import Commit, Link
    from frontier.state.redis_state import RedisCrawlState

    r = cfg.storage.redis
    policy = crawl_policy(cfg)
    with RedisCrawlState(r.url, policy, crawl=r.crawl, cluster=r.cluster, canonical=cfg.canonical,
                         allow_unauthenticated=r.allow_unauthenticated, allow_plaintext=r.allow_plaintext,
                         give_up_after=r.give_up_after) as state:
        for start in range(0, len(urls), SPOOL_CHUNK):
            state.commit(Commit(links=[Link(url, 0, recrawl=True) for url in urls[start:start + SPOOL_CHUNK]]),
                         time.time())
    return f"in crawl {r.crawl!r} on the server (running instances lease them at once)"
