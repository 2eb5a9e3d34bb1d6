"""The HTTP face of the service: starlette routes over ``service.Service``.

Why starlette and uvicorn: both are already installed with dagster-webserver (which is built on them), are small
and well kept, and give an ASGI app a test client (``starlette.testclient``) and a production server (uvicorn with
uvloop and httptools) without another dependency; pyproject names them explicitly now that PULSE uses them itself.

Every answer is JSON. Every refusal is a 4xx ``{"error": "<one line>"}`` (``validation.Rejected``): starlette's own
404 and 405 too. A bug is a 500 ``{"error": "internal error ..."}`` with the traceback in the log, never a body
or a token. Routes:

- ``POST /v1/asks``: the session's ask decision (``Service.ask``);
- ``POST /v1/ratings``: a rating, PULSE's body or OpenHands' feedback body (``Service.rate``);
- ``GET /rate/{session_id}?segment=<i>&sig=<s>``: the rating page (``rate_page.rate_page_html``), for a valid link;
- ``GET /healthz``: ``{"ok": ..., journal and roll figures}``; ``GET /metrics``: Prometheus text (``metrics.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from urllib.parse import unquote

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from . import rate_page
from .auth import signature_valid
from .service import Service
from .validation import MAX_BODY, MAX_SEGMENT, Rejected, ask_request, parse_body, rating_request

log = logging.getLogger("pulse.serve")


def json_response(body: dict, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json", headers=headers)


async def read_body(request: Request) -> bytes:
    """The body, at most ``MAX_BODY`` bytes: refused by its Content-Length before reading, else as it streams."""
    length = request.headers.get("content-length")
    if length is not None:
        if not length.isdigit():
            raise Rejected(400, "bad_length", f"Content-Length {length[:20]!r} is not a number of bytes")
        if int(length) > MAX_BODY:
            raise Rejected(413, "too_large", f"the body is {int(length)} bytes: at most {MAX_BODY} (64 KiB)")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise Rejected(413, "too_large", f"the body is over {MAX_BODY} bytes (64 KiB)")
        chunks.append(chunk)
    return b"".join(chunks)


Handler = Callable[[Request, Service], Awaitable[Response]]


def endpoint(route: str, handler: Handler, service: Service) -> Callable[[Request], Awaitable[Response]]:
    """``handler`` with refusals as JSON 4xx, a bug as a JSON 500, and its latency and status counted."""

    async def run(request: Request) -> Response:
        started = time.perf_counter()
        try:
            response = await handler(request, service)
        except Rejected as refused:
            service.metrics.count("rejected", refused.code)
            response = json_response({"error": refused.message}, refused.status, refused.headers)
        except ClientDisconnect:
            response = Response(status_code=400)  # nobody reads it
        except Exception:  # a bug: said in the log with its traceback, never with the request's body
            log.exception("internal error answering %s %s", request.method, route)
            response = json_response({"error": "internal error (a bug in PULSE): see the service's log"}, 500)
        service.metrics.observe(route, response.status_code, time.perf_counter() - started)
        return response

    return run


async def post_ask(request: Request, service: Service) -> Response:
    caller = service.caller(request.headers.get("authorization"), _client(request))
    service.limiter.check(caller)
    ask = ask_request(parse_body(await read_body(request)))
    return json_response((await service.ask(ask)).as_json())


async def post_rating(request: Request, service: Service) -> Response:
    authorization = request.headers.get("authorization")
    if authorization is not None:  # a wrong token is refused before the body is read
        service.tokens.caller(authorization)
    rating = rating_request(parse_body(await read_body(request)), request.headers.get("idempotency-key"))
    caller = service.caller(authorization, _client(request), rating)
    service.limiter.check(caller)
    answer = await service.rate(rating, caller)
    return json_response(answer.as_json(), 200 if answer.duplicate else 201)


async def get_rate_page(request: Request, service: Service) -> Response:
    session_id = _rate_session(request)
    sig = request.query_params.get("sig")
    if not sig or not signature_valid(service.secret, session_id, sig):
        raise Rejected(403, "bad_signature", "this rating link is not valid: ask the agent for a new one")
    segment = request.query_params.get("segment")
    if segment is not None and not (segment.isdigit() and int(segment) <= MAX_SEGMENT):
        raise Rejected(400, "wrong_type", f"segment {segment[:20]!r} is not a whole number from 0 to {MAX_SEGMENT}")
    service.limiter.check(f"link of {session_id}")
    html = rate_page.rate_page_html(session_id, None if segment is None else int(segment), sig)
    return HTMLResponse(html, headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"})


async def get_health(request: Request, service: Service) -> Response:
    health = service.health()
    return json_response(health, 200 if health["ok"] else 503)


async def get_metrics(request: Request, service: Service) -> Response:
    if service.tokens.required:
        service.caller(request.headers.get("authorization"), _client(request))
    text = service.metrics.render(service.gauges())
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4")


def _rate_session(request: Request) -> str:
    """The session id of a ``/rate/<quoted id>`` path, unquoted once from the raw path (an id may hold ``/``,
    ``%`` or ``?``, which the link quotes; a server that decodes the path twice would change such an id)."""
    raw = request.scope.get("raw_path")
    if raw and b"/rate/" in raw:
        return unquote(raw.split(b"/rate/", 1)[1].decode("utf-8", "surrogateescape"), errors="surrogateescape")
    return request.path_params["session_id"]


def _client(request: Request) -> str:
    return request.client.host if request.client else "unknown"


async def http_error(request: Request, error: Exception) -> Response:
    """Starlette's own refusals (no such route, a method the route does not take) as JSON."""
    assert isinstance(error, HTTPException)
    what = {404: f"no route {request.url.path}", 405: f"{request.method} is not allowed on {request.url.path}"}
    message = what.get(error.status_code, str(error.detail))
    return json_response({"error": message + ": see /healthz, POST /v1/asks, POST /v1/ratings"}, error.status_code)


def create_app(service: Service) -> Starlette:
    """The app; its lifespan opens the service (lock, replay, threads) and closes it (journal, last roll)."""

    @asynccontextmanager
    async def lifespan(app: Starlette):
        service.open()
        try:
            yield
        finally:
            service.close()

    routes = [
        Route("/v1/asks", endpoint("/v1/asks", post_ask, service), methods=["POST"]),
        Route("/v1/ratings", endpoint("/v1/ratings", post_rating, service), methods=["POST"]),
        Route("/rate/{session_id:path}", endpoint("/rate", get_rate_page, service), methods=["GET"]),
        Route("/healthz", endpoint("/healthz", get_health, service), methods=["GET"]),
        Route("/metrics", endpoint("/metrics", get_metrics, service), methods=["GET"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: http_error})
