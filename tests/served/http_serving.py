"""One local HTTP server for the test engines (sglang_server.py, vllm_server.py): a fake behind a handler
class, on a free loopback port, shut down on exit."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from typing import Any, Callable, Iterator


@contextmanager
def http_serving(handler: type, fake: Any, on_close: Callable[[], None] | None = None) -> Iterator[str]:
    """Serve ``fake`` (as ``server.fake``) through ``handler``; yields the base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.fake = fake
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        if on_close is not None:
            on_close()
