"""The `serve` command's options, apart from cli.py (which imports grpc): `frontier --help` and `frontier serve
--help` build them on an install without the `service` extra."""

from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_ADDRESS = "127.0.0.1:7071"
DEFAULT_TOKEN_ENV = "FRONTIER_GRPC_TOKEN"
DEFAULT_DELAY = 1.0  # seconds between two answers of one queue, until SetDelay with an empty key changes it


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--config", type=Path, help="crawl.yaml: storage.data_dir (and storage.fsync)")
    where.add_argument("--data-dir", type=Path, help="the data dir, without a crawl.yaml")
    parser.add_argument("--grpc", default=DEFAULT_ADDRESS, metavar="HOST:PORT",
                        help=f"address to serve (default {DEFAULT_ADDRESS}; port 0: any free port)")
    parser.add_argument("--tls-cert", type=Path, help="PEM certificate chain (with --tls-key: serve TLS)")
    parser.add_argument("--tls-key", type=Path, help="PEM private key")
    parser.add_argument("--token-env", default=DEFAULT_TOKEN_ENV, metavar="VAR",
                        help=f"environment variable holding the shared token (default {DEFAULT_TOKEN_ENV}); when "
                             "set, every call must send `authorization: Bearer <token>`")
    parser.add_argument("--allow-insecure-bind", action="store_true",
                        help="serve a non-loopback address without TLS and a token")
    parser.add_argument("--delay", type=float, default=DEFAULT_DELAY,
                        help=f"default seconds between two answers of one queue (default {DEFAULT_DELAY:g})")
