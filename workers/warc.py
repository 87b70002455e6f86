"""One gzip WARC file per worker process, written with warcio.

    WarcWriter(path, *, software="frontier") ; .write_exchange(...) ; .close()
    worker_warc_path(base, worker_id) -> Path      "crawl.warc.gz" -> "crawl-w3.warc.gz"

Each fetched page becomes a `response` record (status line, headers as received minus Transfer-Encoding,
the body exactly as it came off the wire, so a gzip body stays gzipped and Content-Encoding stays true) and
a `request` record (the headers actually sent), linked by WARC-Concurrent-To. Every record is its own gzip
member and the file is flushed after each pair, so a killed worker loses at most the pair being written
and the file stays readable. The file is opened for appending: a resumed crawl adds to it (a new
warcinfo record marks the restart).

A revisit of an unchanged page (frontier.crawl.revisit) writes a `revisit` record instead of a response: profile
server-not-modified for a 304 (its status line and headers, no body), identical-payload-digest for a 200 whose
body equals the last capture's (its headers, no body, WARC-Payload-Digest of the body). Both name the URL and date
of the capture they stand for (WARC-Refers-To-Target-URI, WARC-Refers-To-Date).

Why one file per worker rather than the one name configured in output.warc: the workers are separate
processes, and one shared file would need a lock around every record pair (and a worker killed
while holding it, or in the middle of a pair, would damage the file for all). WARC readers and
replay tools take a set of files; run_frontier prints the names at the end of a crawl.
"""

from __future__ import annotations

import base64
import hashlib
import io
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

__all__ = ["IDENTICAL_PAYLOAD_PROFILE", "NOT_MODIFIED_PROFILE", "WarcWriter", "payload_digest", "worker_warc_path"]

NOT_MODIFIED_PROFILE = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
IDENTICAL_PAYLOAD_PROFILE = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"


def payload_digest(body: bytes) -> str:
    """A WARC payload digest: "sha1:" + the body's SHA-1 in base32 (what warcio writes for a response)."""
    return "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode()


def warc_date(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

_SUFFIXES = (".warc.gz", ".warc", ".gz")
_HOP_BY_HOP = frozenset({"transfer-encoding"})  # the body is stored de-chunked


def worker_warc_path(base: Path, worker_id: int) -> Path:
    """`<dir>/<stem>-w<worker_id>.warc.gz` for the configured `output.warc` path."""
    name = base.name
    for suffix in _SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
            break
    return base.with_name(f"{name}-w{worker_id}.warc.gz")


def _http_headers(url: str, method: str, request_headers: Iterable[tuple[str, str]], http_version: str, status: int,
                  status_reason: str, response_headers: Iterable[tuple[str, str]]
                  ) -> tuple[StatusAndHeaders, StatusAndHeaders]:
    """The request's and the response's HTTP headers as warcio records them."""
    target = url.split("://", 1)[-1]
    path = target[target.find("/"):] if "/" in target else "/"
    request = StatusAndHeaders(f"{method} {path} {http_version}", list(request_headers), is_http_request=True)
    response = StatusAndHeaders(f"{status} {status_reason}".rstrip(),
                                [(k, v) for k, v in response_headers if k.lower() not in _HOP_BY_HOP],
                                protocol=http_version)
    return request, response


class WarcWriter:
    """Appends request/response record pairs to one gzip WARC file; `close()` is idempotent."""

    def __init__(self, path: Path, *, software: str = "frontier") -> None:
        self._file: io.BufferedWriter | None = None
        self.path = Path(path)
        self.records = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "ab")  # noqa: SIM115 - owned by this object, closed in close()
        self._writer = WARCWriter(self._file, gzip=True)
        info = self._writer.create_warcinfo_record(
            self.path.name, {"software": software, "format": "WARC File Format 1.1"}
        )
        self._writer.write_record(info)
        self._file.flush()

    def write_exchange(
        self,
        *,
        url: str,
        method: str,
        request_headers: Iterable[tuple[str, str]],
        http_version: str,
        status: int,
        status_reason: str,
        response_headers: Iterable[tuple[str, str]],
        body: bytes,
        ip: str | None = None,
    ) -> None:
        """Write one response record and its request record, then flush."""
        if self._file is None:
            raise ValueError("WarcWriter is closed")
        writer = self._writer
        req_headers, resp_headers = _http_headers(url, method, request_headers, http_version, status, status_reason,
                                                  response_headers)
        extra = {"WARC-IP-Address": ip} if ip else None
        response = writer.create_warc_record(url, "response", payload=io.BytesIO(body),
                                             length=len(body), http_headers=resp_headers,
                                             warc_headers_dict=extra)
        request = writer.create_warc_record(url, "request", payload=io.BytesIO(b""), length=0,
                                            http_headers=req_headers)
        writer.write_request_response_pair(request, response)
        self._file.flush()
        self.records += 2

    def write_revisit(
        self,
        *,
        url: str,
        method: str,
        request_headers: Iterable[tuple[str, str]],
        http_version: str,
        status: int,
        status_reason: str,
        response_headers: Iterable[tuple[str, str]],
        body: bytes,
        profile: str,
        refers_to_date: float,
        payload_digest: str = "",
        ip: str | None = None,
    ) -> None:
        """Write one revisit record (`profile`, see the module docstring; the body is not stored) and its request
        record, then flush. `refers_to_date`: when the capture it stands for was fetched (wall clock)."""
        if self._file is None:
            raise ValueError("WarcWriter is closed")
        writer = self._writer
        req_headers, resp_headers = _http_headers(url, method, request_headers, http_version, status, status_reason,
                                                  response_headers)
        extra = {"WARC-Profile": profile, "WARC-Refers-To-Target-URI": url,
                 "WARC-Refers-To-Date": warc_date(refers_to_date)}
        if payload_digest:
            extra["WARC-Payload-Digest"] = payload_digest
        if ip:
            extra["WARC-IP-Address"] = ip
        revisit = writer.create_warc_record(url, "revisit", http_headers=resp_headers, warc_headers_dict=extra)
        request = writer.create_warc_record(url, "request", payload=io.BytesIO(b""), length=0,
                                            http_headers=req_headers)
        writer.write_request_response_pair(request, revisit)
        self._file.flush()
        self.records += 2

    def close(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            file.close()

    def __enter__(self) -> WarcWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
