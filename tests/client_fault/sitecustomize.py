"""A fault of the Redis client itself, for tests/test_redis_crawl.py: with this folder first on PYTHONPATH, every
process of a run imports it at start. While the file named by FRONTIER_CLIENT_FAULT exists, redis-py's
connections raise an AttributeError when they send a command, from inside redis-py's call stack, as a bug of
a redis-py release does (8.2.0: "'NoneType' object has no attribute 'host'" on an ASK redirect)."""

from __future__ import annotations

import os

FLAG = os.environ.get("FRONTIER_CLIENT_FAULT")

if FLAG:
    from redis.connection import AbstractConnection

    _send = AbstractConnection.send_packed_command

    def send_packed_command(self: AbstractConnection, command: object, check_health: bool = True) -> None:
        if os.path.exists(FLAG):  # type: ignore[arg-type]
            raise AttributeError("'NoneType' object has no attribute 'host' (injected)")
        _send(self, command, check_health)

    AbstractConnection.send_packed_command = send_packed_command  # type: ignore[method-assign]
