"""`python -m frontier <command>` (or the `frontier` console script, frontier.cli.commands): the crawl and its tools.

    python -m frontier crawl --config crawl.yaml [--fresh [--yes]]     (see frontier/cli/supervisor.py)
    python -m frontier fresh --config crawl.yaml [--yes]               (deletes the crawl; crawls nothing)

    python -m frontier params --capacity 10e9 --error-rate 1e-4 [--budget-gb 30] [--partitions 64] [--blocked]
    python -m frontier blacklist build|add|check|allow|info PATH ...   (see frontier/cli/blacklist.py)
    python -m frontier status DATA_DIR [--json]                         (see frontier/cli/ops.py)
    python -m frontier export DATA_DIR --what fetched|failed|skipped|queued
    python -m frontier report hosts|queues|seeds DATA_DIR [--json|--csv] (see frontier/cli/report.py)
    python -m frontier recrawl --config crawl.yaml URL ...|--input FILE   (see frontier/cli/recrawl.py)
    python -m frontier serve --config crawl.yaml [--grpc 127.0.0.1:7071]  (see frontier/urlfrontier/cli.py)
    python -m frontier ctl ACTION ... --data-dir DIR|--config crawl.yaml  (see frontier/cli/ctl.py)

`params` prints the Bloom filter size for a capacity and error rate (m = -n ln p / (ln 2)^2 bits,
k = round((m/n) ln 2) hashes), whether it fits a memory budget, and the layout `SharedBloom.create`
would actually allocate: generation 0 at the tightened rate p*(1-r), split into partitions that must
each stay under 2^28 bits for generation 0 (where the position math is uniform; frontier.seen.positions) and
2^32 for growth, and how far that layout can grow; then the file `blacklist build` would make (a blocked
filter, one 64-byte block per URL, sized with the blocked formula: frontier.seen.sizing.blacklist_parameters).
Bad arguments exit with status 2; a
partition count too small for generation 0, or a capacity too large for any (SharedBloom.create would
refuse both), exits with status 1.

A command is a `(help, add_arguments, run)` entry in COMMANDS; `run(args)` returns the exit status and
may call `args.parser.error(message)` (status 2). The benchmarks are their own entry point,
`python -m frontier.bench seen`; to offer them here too, add a "bench" entry whose add_arguments
takes `nargs=argparse.REMAINDER` and whose run returns `frontier.bench.__main__.main(args.rest)`.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

from frontier import __version__
from frontier.cli import blacklist as blacklist_cli, commands as cli, ctl, ops as opscli, recrawl, report as reportcli
from frontier.errors import ConfigError
from frontier.seen.bloom import MAX_PARTITIONS
from frontier.seen.sizing import (BLACKLIST_HEADROOM, BLOCK_BITS, GB, UNIFORM_LIMIT, blacklist_parameters,
                                  blocked_generation, bloom_parameters, format_size, generation_bytes, generation_geometry,
                                  generation_rate, header_size, memory_shortfall, min_partitions)
from frontier.urlfrontier import options as serve_options

DEFAULT_BUDGET_GB = 30.0
GROWTH_ROWS = 3  # generations shown in the growth table (0..2 hold 7x the capacity)


def _number(text: str) -> float:
    """A count as typed: "10000000", "10_000_000", "1e7" or "10e9"."""
    try:
        return int(text.replace("_", ""))
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _params_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--capacity", type=_number, required=True, help="URLs to hold, e.g. 10e9")
    parser.add_argument("--error-rate", type=float, required=True, help="target false-positive rate, e.g. 1e-4")
    parser.add_argument("--budget-gb", type=float, default=DEFAULT_BUDGET_GB,
                        help=f"memory budget in GB (10^9 bytes) to check against (default {DEFAULT_BUDGET_GB:g})")
    parser.add_argument("--partitions", type=int, default=None,
                        help=f"SharedBloom partitions, a power of two in [1, {MAX_PARTITIONS}] (default 64)")
    parser.add_argument("--blocked", action="store_true",
                        help="SharedBloom's blocked layout (dedup.blocked: one cache line a URL, more memory)")


def _params(args: argparse.Namespace) -> int:
    from frontier.seen.bloom import (DEFAULT_PARTITIONS, GROWTH, TIGHTENING, check_partitions, partition_limit,
                                     partitions_needed)

    if args.partitions is not None:
        check_partitions(args.partitions)  # a ConfigError: main() reports it as --partitions, status 2
    if not (math.isfinite(args.budget_gb) and args.budget_gb > 0):
        args.parser.error(f"--budget-gb must be a positive number, got {args.budget_gb:g}")
    partitions = DEFAULT_PARTITIONS if args.partitions is None else args.partitions
    p = bloom_parameters(args.capacity, args.error_rate)
    n = p.capacity
    budget = args.budget_gb * GB
    print(f"Bloom filter for {n:,} URLs at false-positive rate {p.error_rate:g}")
    print(f"  bits               {p.bits:,}   (m = -n ln p / (ln 2)^2)")
    print(f"  hashes             {p.hashes}   (k = round((m/n) ln 2))")
    print(f"  bits per URL       {p.bits_per_item:.2f}")
    print(f"  size               {format_size(p.bytes)}, {p.bytes:,} bytes")
    print(f"  expected FP rate   {p.expected_error_rate:.4g} at capacity (with k rounded to a whole number)")
    verdict = "fits" if p.bytes <= budget else "does NOT fit"
    print(f"  budget             {verdict} in {args.budget_gb:g} GB ({100 * p.bytes / budget:.1f}% of it)")
    need = min_partitions(p.bits, UNIFORM_LIMIT)
    print(f"  partitions         >= {need} (a power of two) of ~{-(-p.bits // need):,} bits: each under 2^28, where "
          "the position math is uniform"
          + (f"; SharedBloom has at most {MAX_PARTITIONS}" if need > MAX_PARTITIONS else ""))

    # What SharedBloom.create(capacity, error_rate, partitions=P) allocates: generation g holds
    # capacity*GROWTH^g at generation_rate(p, g) (the compound rate stays below p), in P partitions.
    rate0 = generation_rate(p.error_rate, 0)
    header = header_size(partitions)
    gen0 = generation_bytes(n, rate0, partitions, blocked=args.blocked)
    print()
    print(f"SharedBloom.create(capacity={n:,}, error_rate={p.error_rate:g}, partitions={partitions}"
          + (", blocked=True): generation 0 blocked (one 512-bit block a URL)" if args.blocked else ")"))
    print(f"  generation 0 is sized for p*(1-r) = {rate0:.4g} (r = {TIGHTENING}) so that growth keeps the rate <= p")
    print(f"  allocates          {format_size(header + gen0)}: bits {gen0:,} bytes + header {header:,} bytes; "
          f"{'fits' if header + gen0 <= budget else 'does NOT fit'} in {args.budget_gb:g} GB")
    shortfall = memory_shortfall(header + gen0)
    print(f"  this machine       {'fits' if shortfall is None else 'does NOT fit: ' + shortfall}")
    need = partitions_needed(n, p.error_rate, blocked=args.blocked)
    print(f"  partition limit    generation 0's partitions < 2^28 = {UNIFORM_LIMIT:,} bits (growth's < 2^32): "
          f"it needs >= {need} partitions (of {generation_geometry(n, rate0, need, blocked=args.blocked)[1]:,} "
          "bits)")
    if need > MAX_PARTITIONS:
        print(f"  ERROR              no layout holds it: SharedBloom has at most {MAX_PARTITIONS} partitions; "
              "lower --capacity (the filter grows past it) or raise --error-rate")
    elif partitions < need:
        print(f"  ERROR              {partitions} partitions of {gen0 * 8 // partitions:,} bits exceed 2^28; "
              f"use --partitions {need} or more")
    print("  growth             generation  capacity              rate        bits/partition   min partitions  "
          "total GB")
    total = header
    for g in range(GROWTH_ROWS):
        cap, rate = n * GROWTH**g, generation_rate(p.error_rate, g)
        size = generation_bytes(cap, rate, partitions, blocked=blocked_generation(args.blocked, g))
        total += size
        per_part = size * 8 // partitions
        mark = "" if per_part < partition_limit(g) else \
            f"   over 2^{partition_limit(g).bit_length() - 1} with {partitions} partitions: " \
            + ("create refuses it" if g == 0 else "growth stops here")
        least = partitions_needed(n, p.error_rate, g, blocked=args.blocked)
        print(f"                     {g:<10}  {cap:<20,}  {rate:<10.3g}  {per_part:<15,}  {least:<14}  "
              f"{total / GB:,.2f}{mark}")
    cum = n * (GROWTH**GROWTH_ROWS - 1)
    print(f"  (generations 0..{GROWTH_ROWS - 1} hold {cum:,} URLs, {cum / n:g}x the capacity)")
    _blacklist_params(n, p.error_rate, p.bytes, args.budget_gb)
    return 1 if partitions < need else 0


def _blacklist_params(n: int, error_rate: float, standard_bytes: int, budget_gb: float) -> None:
    """What `Blacklist.build(path, n, error_rate)` makes, against the standard filter above."""
    from frontier.seen.blacklist import file_size

    print()
    print(f"Blacklist.build(capacity={n:,}, error_rate={error_rate:g})   (python -m frontier blacklist build)")
    try:
        b = blacklist_parameters(n, error_rate)
    except ConfigError as e:
        print(f"  ERROR              {e}")
        return
    file_bytes = file_size(b)
    print(f"  layout             blocked: a URL's bits in one block of {BLOCK_BITS} bits (one cache line)")
    print(f"  sized for          {BLACKLIST_HEADROOM:g} p = {BLACKLIST_HEADROOM * error_rate:.4g} with the blocked "
          "formula (sum over the Poisson block load of each load's rate)")
    print(f"  blocks             {b.blocks:,} ({b.bits:,} bits), {b.hashes} hashes, {b.bits_per_item:.2f} bits per URL")
    print(f"  file               {format_size(file_bytes)}, {file_bytes:,} bytes (bits {b.bytes:,} + header "
          f"{file_bytes - b.bytes:,}); {b.bytes / standard_bytes - 1:+.1%} on the standard filter at p")
    print(f"  expected FP rate   {b.expected_error_rate:.4g} at capacity")
    verdict = "fits" if file_bytes <= budget_gb * GB else "does NOT fit"
    print(f"  budget             {verdict} in {budget_gb:g} GB ({100 * file_bytes / (budget_gb * GB):.1f}% of it)")


SERVICE_EXTRA = "pip install 'frontier-crawl[service]'"


def _serve(args: argparse.Namespace) -> int:
    """The service imports grpc and protobuf, the `service` extra: without them, one line says what to install."""
    try:
        from frontier.urlfrontier import cli as service
    except ModuleNotFoundError as e:
        if (e.name or "").partition(".")[0] not in ("grpc", "google"):
            raise
        print(f"{args.parser.prog}: needs the service extra (grpcio, protobuf): {SERVICE_EXTRA}", file=sys.stderr)
        return 2
    return service.run(args)


COMMANDS: dict[str, cli.Command] = {
    **cli.SUPERVISOR_COMMANDS,
    "params": ("Bloom filter size for a capacity and error rate, and whether it fits a budget",
               _params_arguments, _params),
    "blacklist": (blacklist_cli.HELP, lambda parser: blacklist_cli.add_arguments(parser, number=_number),
                  blacklist_cli.run),
    "status": (opscli.STATUS_HELP, opscli.status_arguments, opscli.status),
    "export": (opscli.EXPORT_HELP, opscli.export_arguments, opscli.export),
    "report": (reportcli.REPORT_HELP, reportcli.report_arguments, reportcli.report),
    "recrawl": (recrawl.HELP, recrawl.add_arguments, recrawl.run),
    "ctl": (ctl.HELP, ctl.add_arguments, ctl.run),
    "serve": ("serve the URL Frontier gRPC API (crawler-commons) from a data dir (needs the service extra)",
              serve_options.add_arguments, _serve),
}


def build_parser(prog: str = "python -m frontier") -> argparse.ArgumentParser:
    parser = cli.build_parser(prog, __doc__.split("\n\n")[0], COMMANDS)
    parser.add_argument("--version", action="version", version=f"frontier-crawl {__version__}")
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "python -m frontier") -> int:
    return cli.run_command(build_parser(prog), COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
