"""Who may talk to the server: loopback by default; another address only with TLS and a shared token.

The token travels as gRPC metadata `authorization: Bearer <token>` on every call; a call without it (or
with another) ends with UNAUTHENTICATED before it reaches the service. A non-loopback bind without both TLS
and a token is refused unless the operator says so (`allow_insecure`): the API can delete whole crawls.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from frontier.config.checks import bind_needs
from frontier.errors import ConfigError

TOKEN_HEADER = "authorization"


def split_address(address: str) -> tuple[str, int]:
    """("host", port) of "host:port" or "[v6]:port"; a ConfigError names what is wrong."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ConfigError(f"expected HOST:PORT, got {address!r}", key="grpc")
    return host.removeprefix("[").removesuffix("]"), int(port)


def check_bind(address: str, *, tls: bool, token: str | None, allow_insecure: bool) -> None:
    """Refuse to serve a non-loopback address without TLS and a token, unless `allow_insecure`."""
    host, _ = split_address(address)
    needs = bind_needs(host, tls=tls, token=token, allow_insecure=allow_insecure)
    if not needs:
        return
    missing = " and ".join({"tls": "TLS (--tls-cert, --tls-key)", "token": "a token"}[what] for what in needs)
    raise ConfigError(f"{host} is not a loopback address: serving it needs {missing}, "
                      "or --allow-insecure-bind to serve it anyway", key="grpc")


class TokenInterceptor(grpc.aio.ServerInterceptor):
    """Ends every call whose metadata lacks `authorization: Bearer <token>` with UNAUTHENTICATED."""

    def __init__(self, token: str) -> None:
        if not token:
            raise ConfigError("the token is empty", key="token")
        self._expected = f"Bearer {token}".encode()

    async def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
                                details: grpc.HandlerCallDetails) -> Any:
        sent = dict(details.invocation_metadata or ()).get(TOKEN_HEADER, "")
        handler = await continuation(details)
        if handler is None or hmac.compare_digest(str(sent).encode(), self._expected):
            return handler
        return _refusal(handler)


async def _deny(request: Any, context: grpc.aio.ServicerContext) -> None:
    await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong token (authorization: Bearer ...)")


def _refusal(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """A handler of the same kind as `handler` that refuses the call."""
    codec = {"request_deserializer": handler.request_deserializer,
             "response_serializer": handler.response_serializer}
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(_deny, **codec)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(_deny, **codec)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(_deny, **codec)
    return grpc.stream_stream_rpc_method_handler(_deny, **codec)
