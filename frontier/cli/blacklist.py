"""`python -m frontier blacklist build|add|check|allow|info`: the Blacklist as a command-line tool.

    python -m frontier blacklist build bl.bin --capacity 1e6 --error-rate 1e-4 --input urls.txt.gz
    python -m frontier blacklist add bl.bin --input more.txt --memory 1G
    python -m frontier blacklist check bl.bin --input crawled.txt        # prints the blacklisted lines
    python -m frontier blacklist check bl.bin --invert --count < crawled.txt
    python -m frontier blacklist allow bl.bin https://example.com/a-known-false-positive
    python -m frontier blacklist info bl.bin

Input is one URL a line, from the --input files (plain or gzip, told apart by their first bytes) or "-",
stdin, which is also the default. URLs are canonicalised (frontier.url.canonical) unless --raw: then each
line without its line end is taken as it is (check a --raw blacklist with --raw too). Empty lines and,
without --raw, lines that are not http(s) URLs are skipped: counted and reported on stderr at the end.

`check` prints the input lines that are (probably) blacklisted, as they were read, like grep; --invert
prints the others, --count only their number. Exit status: 0 done (check: some line was selected),
1 check selected no line, 2 error (one line on stderr: a bad argument; a missing, foreign, truncated or
incomplete blacklist; unreadable or corrupt input; a full disk), 130 interrupted. A build or add that
stops early leaves the file marked incomplete: `check` refuses it until `add --allow-incomplete` has
added the same input again (adding is idempotent). On a terminal, a progress bar (lines, rate, ETA from
the bytes read) goes to stderr; otherwise nothing is printed while the command runs.

`build` and `add` load in bulk (`Blacklist.bulk`): the URLs' fingerprints are buffered, --memory bytes at
most (default 256M: 16M URLs), and each full buffer is added in one pass over the file in ascending order,
so the cost per URL stays flat however large the file (frontier/seen/blacklist.py). A filter over 16x --memory
(10^10 URLs: 28 GB) spools the fingerprints to a temporary directory beside it (--spool-dir; 16 bytes a
URL), applied segment by segment at the end, or each time the spool holds --spool-limit bytes.
"""

from __future__ import annotations

import argparse
import gzip
import os
import stat
import sys
import time
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import compress
from typing import TYPE_CHECKING, BinaryIO

from frontier.errors import ConfigError, FrontierError

if TYPE_CHECKING:  # the CLI imports the library only when a command runs
    from frontier.seen.blacklist import Blacklist

HELP = "build and query a file-backed URL blacklist (a Bloom filter many processes share)"
SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
READ_BYTES = 1 << 20  # input read per batch (about 12k URLs)
GZIP_MAGIC = b"\x1f\x8b"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


class InputError(Exception):
    """An input file that cannot be read to its end."""


@dataclass
class Batch:
    """Lines of one input file: `lines` as read (line end included), `texts` what goes to the filter."""

    source: str
    lines: list[bytes]
    texts: list[str]


@dataclass
class Skips:
    """Lines that were not URLs: counted by kind, the first of each kind kept for the report."""

    counts: dict[str, int] = field(default_factory=dict)
    first: dict[str, str] = field(default_factory=dict)

    def add(self, kind: str, n: int, example: str) -> None:
        if n:
            self.counts[kind] = self.counts.get(kind, 0) + n
            self.first.setdefault(kind, example)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def report(self) -> str | None:
        if not self.total:
            return None
        kinds = ", ".join(f"{n:,} {kind} (first in {self.first[kind]})" for kind, n in self.counts.items())
        return f"skipped {_count(self.total, 'line')}: {kinds}"


class Progress:
    """A rich progress bar on stderr when it is a terminal; nothing otherwise."""

    def __init__(self, total_bytes: int | None) -> None:
        self._bar = None
        self._started = time.monotonic()
        if not sys.stderr.isatty():
            return
        from rich.console import Console
        from rich.progress import BarColumn, Progress as Bar, TaskProgressColumn, TextColumn, TimeRemainingColumn

        self._bar = Bar(TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(),
                        TextColumn("{task.fields[lines]:>12,} lines  {task.fields[rate]:>10,.0f} lines/s"),
                        TimeRemainingColumn(), console=Console(file=sys.stderr), transient=True)
        self._bar.start()
        self._task = self._bar.add_task("reading", total=total_bytes, lines=0, rate=0.0)

    def update(self, done_bytes: int, lines: int) -> None:
        if self._bar is not None:
            rate = lines / max(1e-9, time.monotonic() - self._started)
            self._bar.update(self._task, completed=done_bytes, lines=lines, rate=rate)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _open_input(name: str) -> tuple[BinaryIO, BinaryIO]:
    """(reader, the raw file under it); gzip is recognised by its first two bytes."""
    raw: BinaryIO = sys.stdin.buffer if name == "-" else open(name, "rb")  # type: ignore[assignment]
    try:
        head = raw.peek(2)[:2]  # type: ignore[attr-defined]
    except BaseException:
        if raw is not sys.stdin.buffer:
            raw.close()
        raise
    return (gzip.GzipFile(fileobj=raw, mode="rb") if head == GZIP_MAGIC else raw), raw


def read_batches(names: list[str], raw_mode: bool, skips: Skips) -> Iterator[Batch]:
    """Batches of non-empty lines from every input in turn, with the progress bar; empty lines are counted in
    `skips`."""
    sizes = []
    for name in names:
        try:
            st = os.stat(name) if name != "-" else None
        except OSError as e:
            raise InputError(f"{name}: {e.strerror}") from None
        sizes.append(st.st_size if st is not None and stat.S_ISREG(st.st_mode) else None)
    progress = Progress(None if None in sizes else sum(sizes))  # type: ignore[arg-type]
    done_before = 0
    lines_read = 0
    try:
        for name, size in zip(names, sizes):
            source = "stdin" if name == "-" else name
            try:
                reader, raw = _open_input(name)
            except OSError as e:
                raise InputError(f"{source}: {e.strerror}") from None
            try:
                while True:
                    try:
                        lines = reader.readlines(READ_BYTES)
                    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
                        raise InputError(f"{source}: corrupt or truncated gzip input ({e})") from None
                    except OSError as e:
                        raise InputError(f"{source}: {e.strerror or e}") from None
                    if not lines:
                        break
                    lines_read += len(lines)
                    stripped = [line.rstrip(b"\r\n") for line in lines]
                    if raw_mode:
                        keep = [bool(s) for s in stripped]
                    else:
                        keep = [bool(s.strip()) for s in stripped]
                    if not all(keep):
                        skips.add("empty", keep.count(False), source)
                        lines = list(compress(lines, keep))
                        stripped = list(compress(stripped, keep))
                    if stripped:
                        yield Batch(source, lines, [s.decode("utf-8", "surrogateescape") for s in stripped])
                    progress.update(done_before + (raw.tell() if size is not None else 0), lines_read)
            finally:
                if raw is not sys.stdin.buffer:
                    reader.close()
                    raw.close()
            done_before += size or 0
    finally:
        progress.close()


def _count_invalid(batch: Batch, invalid: dict[int, FrontierError], skips: Skips) -> None:
    if invalid:
        first = invalid[min(invalid)]
        skips.add("not a URL", len(invalid), f"{batch.source}: {first}")


# -- commands ---------------------------------------------------------------------------------


def memory_size(text: str) -> int:
    """A byte count such as 268435456, 256M, 1.5G (K, M, G, T: powers of 1024; a trailing B or iB is allowed)."""
    body = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = body[-1:] if body[-1:] in SIZE_UNITS and body[-1:] else ""
    try:
        value = float(body[:len(body) - len(unit)]) * SIZE_UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 512M, 2G)") from None
    from frontier.seen.blacklist import MIN_BULK_MEMORY  # here, not at import: checked before a file is created

    if not MIN_BULK_MEMORY <= value < 1 << 50:
        raise argparse.ArgumentTypeError(f"{text!r}: a bulk load needs at least {MIN_BULK_MEMORY >> 10}K")
    return int(value)


def _feed(args: argparse.Namespace, bl: Blacklist) -> int:
    """Add every input line in bulk; print the summary; 0."""
    skips = Skips()
    read = 0
    before = len(bl)
    options = {"spool_dir": args.spool_dir, "spool_limit": args.spool_limit}
    if args.memory is not None:
        options["memory"] = args.memory
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # over capacity: reported below, once
        with bl.bulk(**options) as load:
            for stale in load.stale_spools:
                print(f"{bl.path}: removed {stale}, the spool of an interrupted build or add", file=sys.stderr)
            for batch in read_batches(args.input, args.raw, skips):
                invalid = load.add_many(batch.texts, canonical=args.raw)
                _count_invalid(batch, invalid, skips)
                read += len(batch.texts) - len(invalid)
            if load.spool_peak and sys.stderr.isatty():  # the last pass over the file can take minutes
                print(f"{bl.path}: applying {load.pending:,} spooled URLs, segment by segment", file=sys.stderr)
    new = len(bl) - before
    print(f"{bl.path}: {_count(read, 'URL')} added, {new:,} new; {len(bl):,} in the filter (capacity {bl.capacity:,})",
          file=sys.stderr)
    _report(skips, bl)
    return 0


def _report(skips: Skips, bl: Blacklist) -> None:
    line = skips.report()
    if line:
        print(f"{bl.path}: {line}", file=sys.stderr)
    if len(bl) > bl.capacity:
        rate = bl.expected_error_rate()
        print(f"{bl.path}: warning: {len(bl):,} URLs is over the capacity of {bl.capacity:,}: the false-positive "
              f"rate is about {rate:.2g}, not {bl.error_rate:g}", file=sys.stderr)


def _check_spool_dir(args: argparse.Namespace) -> None:
    """Before the file is created or opened for writing (which marks it incomplete until a clean close)."""
    if args.spool_dir is not None and not os.path.isdir(args.spool_dir):
        args.parser.error(f"--spool-dir {args.spool_dir}: not a directory")


def _build(args: argparse.Namespace) -> int:
    from frontier.seen.blacklist import Blacklist

    _check_spool_dir(args)
    with Blacklist.build(args.path, args.capacity, args.error_rate) as bl:
        return _feed(args, bl)


def _add(args: argparse.Namespace) -> int:
    from frontier.seen.blacklist import Blacklist

    _check_spool_dir(args)
    with Blacklist.open(args.path, writable=True, allow_incomplete=args.allow_incomplete) as bl:
        return _feed(args, bl)


def _check(args: argparse.Namespace) -> int:
    from frontier.seen.blacklist import Blacklist

    skips = Skips()
    selected = 0
    out = sys.stdout.buffer
    with Blacklist.open(args.path, allow_incomplete=args.allow_incomplete) as bl:
        for batch in read_batches(args.input, args.raw, skips):
            found = bl.contains_many(batch.texts, canonical=args.raw)
            if found.invalid:
                _count_invalid(batch, found.invalid, skips)
                chosen = [f != args.invert and i not in found.invalid for i, f in enumerate(found)]
            else:
                chosen = [f != args.invert for f in found]
            lines = list(compress(batch.lines, chosen))
            selected += len(lines)
            if lines and not args.count:
                if not lines[-1].endswith(b"\n"):
                    lines[-1] += b"\n"
                out.write(b"".join(lines))
        if args.count:
            out.write(f"{selected}\n".encode())
        out.flush()
        _report(skips, bl)
    return 0 if selected else 1


def _allow(args: argparse.Namespace) -> int:
    from frontier.seen.blacklist import Blacklist

    if bool(args.urls) == bool(args.input):
        args.parser.error("give the URLs to allow either as arguments or with --input")
    skips = Skips()
    allowed = new = 0
    with Blacklist.open(args.path, allow_incomplete=True) as bl:  # the whitelist is its own file
        batches = read_batches(args.input, args.raw, skips) if args.input else \
            [Batch("arguments", [], args.urls)]
        for batch in batches:
            result = bl.allow(batch.texts, canonical=args.raw)
            _count_invalid(batch, result.invalid, skips)
            allowed += len(batch.texts) - len(result.invalid)
            new += sum(result)
        print(f"{bl.allow_path}: {_count(allowed, 'URL')} allowed, {new:,} new", file=sys.stderr)
        line = skips.report()
        if line:
            print(f"{bl.path}: {line}", file=sys.stderr)
    return 0


def _info(args: argparse.Namespace) -> int:
    from frontier.seen.blacklist import Blacklist

    with Blacklist.open(args.path, allow_incomplete=True) as bl:
        info = bl.info()
        share = f" ({100 * info['count'] / info['capacity']:.1f}% of capacity)"
        rows = [
            ("path", info["path"]),
            ("state", info["state"] + ("" if info["state"] == "complete" else
                                       ": an add or build is running or was interrupted; check refuses it")),
            ("capacity", f"{info['capacity']:,}"),
            ("count", f"{info['count']:,}{share}"),
            ("target FP rate", f"{info['error_rate']:g}"),
            ("layout", info["layout"]),
            ("bits", f"{info['bits']:,} in {info['geometry']}, {info['hashes']} hashes, "
                     f"{info['bits'] / info['capacity']:.2f} bits per URL of capacity"),
            ("fill", f"{100 * info['fill_ratio']:.2f}% of the bits set"),
            ("estimated FP rate", f"{info['estimated_false_positive_rate']:.3g} (fill ^ hashes"
                                  f"{', block by block' if info['layout'].startswith('2') else ''})"),
            ("bytes on disk", f"{info['disk_bytes']:,} (file size {info['file_bytes']:,})"),
            ("whitelist", f"{info['allowed']:,} URLs ({bl.allow_path})"),
            ("canonicalisation", info["canonicalisation"]),
        ]
    for key, value in rows:
        print(f"{key:<18} {value}")
    return 0


ACTIONS = {
    "build": (_build, "create PATH sized for --capacity URLs at --error-rate and add the input"),
    "add": (_add, "add the input to an existing blacklist"),
    "check": (_check, "print the input lines that are (probably) blacklisted, like grep"),
    "allow": (_allow, "whitelist URLs (known false positives): check never reports them again"),
    "info": (_info, "capacity, count, fill, estimated false-positive rate, bytes on disk"),
}


def add_arguments(parser: argparse.ArgumentParser, *, number: Callable[[str], float]) -> None:
    """The blacklist actions as sub-commands; `number` parses counts such as "10e9"."""
    sub = parser.add_subparsers(dest="action", metavar="action", required=True)
    for name, (_, help_text) in ACTIONS.items():
        action = sub.add_parser(name, help=help_text, description=help_text)
        action.add_argument("path", help="the blacklist file")
        if name == "build":
            action.add_argument("--capacity", type=number, required=True, help="URLs it will hold, e.g. 1e9")
            action.add_argument("--error-rate", type=float, required=True, help="target false-positive rate, e.g. 1e-4")
        if name == "allow":
            action.add_argument("urls", nargs="*", metavar="URL", help="URLs to allow")
        if name != "info":
            action.add_argument("--input", nargs="+", action="extend", default=None, metavar="FILE",
                                help="input files, plain or gzip; - is stdin" +
                                     ("" if name == "allow" else " (the default)"))
            action.add_argument("--raw", action="store_true", help="take lines as they are: no canonicalisation")
        if name in ("build", "add"):
            action.add_argument("--memory", type=memory_size, default=None, metavar="SIZE",
                                help="buffer of the bulk load, at least 64K, e.g. 512M or 2G (default 256M, "
                                     "frontier.seen.blacklist.DEFAULT_BULK_MEMORY: 16M URLs a pass over the file; "
                                     "more memory, fewer passes)")
            action.add_argument("--spool-dir", metavar="DIR", default=None,
                                help="where a filter over 16x --memory spools (16 bytes a URL; default: beside "
                                     "PATH, on the same file system)")
            action.add_argument("--spool-limit", type=memory_size, default=None, metavar="SIZE",
                                help="apply the spool each time it holds this much, e.g. 50G (default: at the end)")
        if name in ("add", "check"):
            action.add_argument("--allow-incomplete", action="store_true",
                                help="accept a file an interrupted build or add left marked incomplete")
        if name == "check":
            action.add_argument("--invert", action="store_true", help="print the lines that are NOT blacklisted")
            action.add_argument("--count", action="store_true", help="print only the number of selected lines")
        action.set_defaults(parser=action)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "input", None) is None and args.action != "allow":
        args.input = ["-"]
    try:
        return ACTIONS[args.action][0](args)
    except ConfigError:
        raise  # `python -m frontier` reports it as the option it came from (status 2)
    except (FrontierError, InputError) as e:
        print(f"error: {e}", file=sys.stderr)
    except BrokenPipeError:  # check | head: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        marked = f"; {args.path} is left marked incomplete" if args.action in ("build", "add") else ""
        print(f"interrupted{marked}", file=sys.stderr)
        return 130
    except OSError as e:
        print(f"error: {getattr(e, 'filename', None) or args.path}: {e.strerror or e}", file=sys.stderr)
    return 2
