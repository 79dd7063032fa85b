"""HTTP transports for the openai backend: aiohttp (default) and httpx.

Both keep a pool of keep-alive connections sized to the endpoint's
concurrency and raise one of two errors, so the backend's retry logic is the
same for either. Why two: on the 2-core reference machine one request costs
about 0.2 ms of client CPU through aiohttp and 0.8 ms through httpx even with
its pool sharded (one httpx pool of 64 connections: ~10 ms, see
encode/httpcore#1035); the engine's budget is 1 ms of CPU per case in all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from ..errors import TransportFailure, TransportTimeout

__all__ = ["AiohttpTransport", "HttpReply", "HttpxTransport", "TransportFailure", "TransportTimeout", "make_transport"]

_CONNECTIONS_PER_HTTPX_CLIENT = 8


def _cause(exc: BaseException) -> str:
    """The error's type and its own words ("ClientConnectorError: Cannot connect to host 127.0.0.1:9 ..."): the
    type alone hides the host and the reason a user needs to fix it."""
    text = " ".join(str(exc).split())[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class HttpReply(NamedTuple):
    """Status, headers (lower-case names) and body of one response."""

    status: int
    headers: Mapping[str, str]
    body: bytes


class AiohttpTransport:
    """One aiohttp session with a connection limit (the default transport)."""

    def __init__(self, base_url: str, headers: Mapping[str, str], concurrency: int, timeout_s: float) -> None:
        import aiohttp

        self._aiohttp = aiohttp
        self._base = base_url.rstrip("/") + "/"
        self._session = aiohttp.ClientSession(
            headers=dict(headers),
            connector=aiohttp.TCPConnector(limit=concurrency, keepalive_timeout=60),
            timeout=aiohttp.ClientTimeout(total=timeout_s),
        )

    async def post(self, path: str, body: bytes) -> HttpReply:
        """POST a JSON body; returns the whole response."""
        try:
            async with self._session.post(
                self._base + path, data=body, headers={"Content-Type": "application/json"}
            ) as response:
                data = await response.read()
                return HttpReply(response.status, {k.lower(): v for k, v in response.headers.items()}, data)
        except TimeoutError as exc:
            raise TransportTimeout(str(exc) or "timeout") from None
        except self._aiohttp.ClientError as exc:
            raise TransportFailure(_cause(exc)) from None

    async def aclose(self) -> None:
        """Close the session and its connections."""
        await self._session.close()


class HttpxTransport:
    """httpx clients with the pool sharded into small ones, each request taking a free slot first."""

    def __init__(self, base_url: str, headers: Mapping[str, str], concurrency: int, timeout_s: float) -> None:
        import asyncio
        import ssl

        import httpx

        self._httpx = httpx
        shards = max(1, -(-concurrency // _CONNECTIONS_PER_HTTPX_CLIENT))
        per_client = -(-concurrency // shards)
        limits = httpx.Limits(max_connections=per_client, max_keepalive_connections=per_client, keepalive_expiry=60)
        tls = ssl.create_default_context()  # load the CA certificates once, not per client
        self._clients = [
            httpx.AsyncClient(
                base_url=base_url.rstrip("/") + "/", headers=dict(headers), limits=limits, timeout=timeout_s, verify=tls
            )
            for _ in range(shards)
        ]
        # A request waits here for a free connection slot rather than inside
        # httpcore's pool, whose bookkeeping grows with the requests queued in it.
        self._slots: asyncio.Queue[int] = asyncio.Queue()
        for _ in range(per_client):
            for index in range(shards):
                self._slots.put_nowait(index)

    async def post(self, path: str, body: bytes) -> HttpReply:
        """POST a JSON body; returns the whole response."""
        slot = await self._slots.get()
        try:
            response = await self._clients[slot].post(path, content=body, headers={"Content-Type": "application/json"})
            return HttpReply(
                response.status_code, {k.lower(): v for k, v in response.headers.items()}, response.content
            )
        except self._httpx.TimeoutException as exc:
            raise TransportTimeout(str(exc) or "timeout") from None
        except self._httpx.TransportError as exc:
            raise TransportFailure(_cause(exc)) from None
        finally:
            self._slots.put_nowait(slot)

    async def aclose(self) -> None:
        """Close every client."""
        for client in self._clients:
            await client.aclose()


def make_transport(
    kind: str, base_url: str, headers: Mapping[str, str], concurrency: int, timeout_s: float
) -> AiohttpTransport | HttpxTransport:
    """A transport by name: ``aiohttp`` or ``httpx``."""
    if kind == "httpx":
        return HttpxTransport(base_url, headers, concurrency, timeout_s)
    return AiohttpTransport(base_url, headers, concurrency, timeout_s)
