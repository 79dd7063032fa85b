"""One request to every endpoint before a run, so a dead or misconfigured one stops the run in seconds.

Without it a refused connection, a wrong host or a base URL without ``/v1``
turns every planned row into an error row, and the run still ends with a
sealed bundle. The preflight runs on endpoints of its own (built from the same
specs, closed afterwards), in its own event loop, before anything of the run
is written; nothing it receives is cached or recorded. Scripted endpoints are
skipped: they answer from the case, and have no server to be wrong about.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import AssayError, PreflightError
from .messages import BackendError, ChatRequest

__all__ = ["preflight_endpoints"]

#: The request an endpoint without a ``preflight`` method of its own is sent.
PING = ChatRequest(({"role": "user", "content": "ping"},), max_tokens=1, context={"preflight": True})


async def _check(endpoint_id: str, endpoint: Any) -> str | None:
    """None when the endpoint answered, else one line naming it and what went wrong."""
    try:
        own = getattr(endpoint, "preflight", None)
        if own is not None:
            await own()
        else:
            await endpoint.complete(PING)
    except BackendError as exc:
        return f"endpoint {endpoint_id} failed its preflight request: {exc}"
    except AssayError as exc:
        return f"endpoint {endpoint_id} failed its preflight request: {exc}"
    finally:
        close = getattr(endpoint, "aclose", None)
        if close is not None:
            await close()
    return None


def preflight_endpoints(endpoints: Sequence[tuple[str, Callable[[], Any]]]) -> None:
    """Send each (endpoint id, factory) one small request; PreflightError names every endpoint that failed.

    A factory builds a fresh endpoint (the run builds its own later): the
    preflight's connections belong to its own event loop and end with it.
    """

    async def go() -> list[str]:
        built = [(endpoint_id, make()) for endpoint_id, make in endpoints]
        live = [(endpoint_id, endpoint) for endpoint_id, endpoint in built if not getattr(endpoint, "scripted", False)]
        found = await asyncio.gather(*(_check(endpoint_id, endpoint) for endpoint_id, endpoint in live))
        return [problem for problem in found if problem is not None]

    problems = asyncio.run(go())
    if problems:
        more = f" (and {len(problems) - 1} more endpoint(s))" if len(problems) > 1 else ""
        raise PreflightError(f"{problems[0]}{more}; fix it, or skip this check with --no-preflight")
