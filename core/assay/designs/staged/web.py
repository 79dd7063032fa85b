"""A real HTTP server on loopback that serves the web pages of work items in flight.

One server per runtime, in a daemon thread; each sandbox registers its pages
under a random prefix, so concurrent work items never see each other's pages.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["PageServer"]


class PageServer:
    """Serves ``/<prefix>/<path>`` for every registered set of pages."""

    def __init__(self) -> None:
        self._sites: dict[str, Mapping[str, tuple[bytes, str]]] = {}
        self._lock = threading.Lock()
        sites, lock = self._sites, self._lock

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                prefix, _, path = self.path.lstrip("/").partition("/")
                with lock:
                    page = sites.get(prefix, {}).get("/" + path)
                if page is None:
                    self.send_error(404)
                    return
                body, content_type = page
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # keep the engine's output clean
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="assay-pages", daemon=True)
        self._thread.start()

    def register(self, pages: Mapping[str, tuple[bytes, str]]) -> str:
        """Serve ``{path: (body, content type)}``; returns the base URL for them."""
        prefix = secrets.token_hex(8)
        with self._lock:
            self._sites[prefix] = dict(pages)
        return f"http://127.0.0.1:{self.port}/{prefix}"

    def unregister(self, base_url: str) -> None:
        """Stop serving a set of pages."""
        with self._lock:
            self._sites.pop(base_url.rsplit("/", 1)[-1], None)

    def close(self) -> None:
        """Stop the server."""
        self._server.shutdown()
        self._server.server_close()
