"""`python -m frontier serve`: the URL Frontier gRPC service of a data dir.

    python -m frontier serve --config crawl.yaml [--grpc 127.0.0.1:7071]
    python -m frontier serve --data-dir DIR [--grpc HOST:PORT] [--tls-cert F --tls-key F] [--token-env VAR]
                             [--allow-insecure-bind] [--delay SECONDS]

The store is DATA_DIR/urlfrontier (storage.data_dir of crawl.yaml; storage.fsync syncs every commit), or
with storage.backend redis the server of storage.redis, shared by every `serve` process pointed at it.
Once listening it prints one line, `serving URL Frontier on HOST:PORT` (port 0 picks a free port), and
serves until SIGINT or SIGTERM. Exit status: 0 after a signal, 1 if the store cannot be opened (in use,
unwritable), 2 for bad arguments or a refused bind.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import grpc

from frontier.errors import ConfigError, StorageError
from frontier.urlfrontier import urlfrontier_pb2_grpc as pb_grpc
from frontier.urlfrontier.options import DEFAULT_ADDRESS, DEFAULT_DELAY
from frontier.urlfrontier.security import TokenInterceptor, check_bind, split_address
from frontier.urlfrontier.server import FrontierServicer, ServiceSettings
from frontier.urlfrontier.store import FrontierStore

if TYPE_CHECKING:
    from frontier.urlfrontier.redis_store import RedisFrontierStore

HELP = "serve the URL Frontier gRPC API (crawler-commons) from a data dir"
STORE_DIR = "urlfrontier"
GRACE = 2.0  # seconds calls under way get to finish on SIGTERM
HEARTBEAT = 10.0  # seconds between two heartbeats of a node (ListNodes of a shared Redis store)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tls:
    """PEM bytes of the server's certificate chain and private key."""

    cert: bytes
    key: bytes


@dataclass(slots=True)
class Running:
    """A started server: `address` is the bound HOST:PORT."""

    server: grpc.aio.Server
    servicer: FrontierServicer
    address: str
    heartbeat: asyncio.Task[None]

    async def stop(self, grace: float | None = None) -> None:
        self.heartbeat.cancel()
        await self.server.stop(grace)
        self.servicer.close()


async def _beat(servicer: FrontierServicer) -> None:
    try:
        await servicer.heartbeat()
    except StorageError as e:
        logging.getLogger(__name__).warning("heartbeat: %s", e)


async def _heartbeat(servicer: FrontierServicer) -> None:
    while True:
        await asyncio.sleep(HEARTBEAT)
        await _beat(servicer)


async def start(store: FrontierStore | RedisFrontierStore, address: str = DEFAULT_ADDRESS, *, tls: Tls | None = None,
                token: str | None = None, allow_insecure: bool = False,
                default_delay: float = DEFAULT_DELAY, clock: Callable[[], float] = time.time) -> Running:
    """Start serving `store` on `address` (port 0: any free port); the caller stops it and closes the store.
    `clock`: seconds since the epoch (a test may drive it)."""
    check_bind(address, tls=tls is not None, token=token, allow_insecure=allow_insecure)
    host, _ = split_address(address)
    server = grpc.aio.server(interceptors=[TokenInterceptor(token)] if token else None)
    if tls is None:
        port = server.add_insecure_port(address)
    else:
        port = server.add_secure_port(address, grpc.ssl_server_credentials([(tls.key, tls.cert)]))
    if port == 0:
        raise ConfigError(f"cannot bind {address}", key="grpc")
    bound = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    servicer = FrontierServicer(store, ServiceSettings(address=bound, default_delay=default_delay), clock=clock)
    pb_grpc.add_URLFrontierServicer_to_server(servicer, server)
    await server.start()
    await _beat(servicer)  # before `start` returns (and the banner): ListNodes of a shared store lists it at once
    return Running(server, servicer, bound, asyncio.create_task(_heartbeat(servicer)))


def _open_store(args: argparse.Namespace) -> FrontierStore | RedisFrontierStore:
    """The store of --data-dir (the default dedup and canonical settings), or of crawl.yaml's storage (lmdb:
    data_dir/urlfrontier, the seen-test of its dedup and canonical sections; redis: the server, keys under
    "uf:<storage.redis.crawl>", URLs canonicalised by its canonical section)."""
    if args.data_dir is not None:
        return FrontierStore(args.data_dir / STORE_DIR)
    from frontier.cli.ops import read_config

    cfg = read_config(args.config)
    if cfg.storage.backend == "lmdb":
        return FrontierStore(cfg.storage.data_dir / STORE_DIR, sync=cfg.storage.fsync, dedup=cfg.dedup,
                             rules=cfg.canonical)
    from frontier.state.redis_conn import connect, redact
    from frontier.urlfrontier.redis_store import RedisFrontierStore

    r = cfg.storage.redis
    client = connect(r.url, cluster=r.cluster, allow_unauthenticated=r.allow_unauthenticated,
                     allow_plaintext=r.allow_plaintext)
    return RedisFrontierStore(client, prefix=f"uf:{r.crawl}", path=redact(r.url), rules=cfg.canonical)


def _tls(args: argparse.Namespace) -> Tls | None:
    if (args.tls_cert is None) != (args.tls_key is None):
        raise ConfigError("give both --tls-cert and --tls-key", key="tls_cert")
    if args.tls_cert is None:
        return None
    try:
        return Tls(cert=args.tls_cert.read_bytes(), key=args.tls_key.read_bytes())
    except OSError as e:
        raise ConfigError(f"cannot read {e.filename}: {e.strerror}", key="tls_cert") from None


async def _serve(store: FrontierStore | RedisFrontierStore, args: argparse.Namespace, tls: Tls | None, token: str | None) -> None:
    running = await start(store, args.grpc, tls=tls, token=token, allow_insecure=args.allow_insecure_bind,
                          default_delay=args.delay)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"serving URL Frontier on {running.address} (store {store.path})", flush=True)
    try:
        await stop.wait()
    finally:
        await running.stop(GRACE)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if not (args.delay >= 0):
        raise ConfigError(f"must be >= 0, got {args.delay}", key="delay")
    token = os.environ.get(args.token_env) or None
    tls = _tls(args)
    check_bind(args.grpc, tls=tls is not None, token=token, allow_insecure=args.allow_insecure_bind)
    try:
        store = _open_store(args)
    except StorageError as e:
        print(f"python -m frontier serve: {e}", file=sys.stderr)
        return 1
    with store:
        asyncio.run(_serve(store, args, tls, token))
    return 0
