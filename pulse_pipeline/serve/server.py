"""``pulse serve``: the app on uvicorn, one process (the journal has one writer), until SIGINT or SIGTERM.

uvicorn's access log is off: it prints each request's query string, and a ``/rate`` link's carries its signature.
The service's own log (``pulse.serve``, INFO) says when it starts, what it replayed and each roll, never a body,
comment, token or signature. On SIGINT or SIGTERM uvicorn stops accepting, finishes the requests under way, and the
app's lifespan closes the service: the journal is written and every record rolled into a drop file.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Callable
from pathlib import Path

from ..settings import ServeSettings

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def base_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so that a port in use is one line (RuntimeError), not uvicorn's exit."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise RuntimeError(f"cannot listen on {host}:{port} ({error.strerror}): choose another --port") from None
    sock.set_inheritable(True)
    return sock


def serve(
    home: Path, settings: ServeSettings, host: str, port: int, public_url: str | None, say: Callable[[str], None]
) -> int:
    import uvicorn

    from .app import create_app
    from .service import Service

    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    sock = listen(host, port)
    url = public_url or base_url(host, port)
    service = Service(home, settings, url).open()  # here, so a held lock or a damaged journal is one line
    auth = f"bearer tokens of {settings.tokens_file}" if settings.tokens else "no auth (loopback only)"
    say(f"PULSE rating service on {base_url(host, port)} (links: {url}; {auth}); drops: {home / 'drops'}")
    config = uvicorn.Config(
        create_app(service), access_log=False, lifespan="on", timeout_graceful_shutdown=10, log_level="info"
    )
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    finally:
        service.close()  # the lifespan closed it already unless uvicorn failed; closing twice is nothing
    return 0
