"""Is a local instance serving? Cloud Run's startup probe, locally, in the two forms the hosts need:
`accepts` (TCP) for a server that loads its handler before it listens (functions-framework), and
`answers` (HTTP) for one that listens first (gunicorn's master binds the port, then its worker
loads the app; a request meanwhile waits for the worker)."""

from __future__ import annotations

import http.client
import socket


def accepts(port: int, timeout: float = 0.2) -> bool:
    """Something accepts TCP connections on 127.0.0.1:`port`."""
    with socket.socket() as sock:
        sock.settimeout(timeout)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def answers(port: int, timeout: float = 0.5) -> bool:
    """An HTTP GET of / on 127.0.0.1:`port` is answered within `timeout`, whatever its status."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", "/")
        connection.getresponse().read()
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()
    return True
