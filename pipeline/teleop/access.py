"""Who may use the teleop server: holders of the launch's secret token, from the served origin.

Browsers let any web page open a WebSocket to 127.0.0.1 (the same-origin policy does not cover
WebSockets), so a page on another site could drive the model and record into the store. Two
checks keep it out, as notebook servers do:

- a secret token, new at every launch (`secrets.token_urlsafe`), in the URL printed at start:
  `/`, `/ws` and `/api/status` answer 403 without it (compared in constant time). The static
  files (`/static/...`) are the package's public code and need no token;
- a request that carries an `Origin` header (every browser WebSocket handshake does) must come
  from the page's own origin: scheme and host:port equal to the `Host` it addressed. A server
  bound to a loopback address also refuses `Host` names that are not loopback, so a DNS name
  rebound to 127.0.0.1 gets nowhere even before the token is checked.

Clients that are not browsers (scripts, tests) send no Origin; the token alone decides for them.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
from collections.abc import Awaitable, Callable
from pathlib import PurePosixPath

from aiohttp import web
from yarl import URL

PUBLIC_PREFIXES = ("/static/",)
LOOPBACK_NAMES = {"localhost", "localhost.localdomain"}
# An absolute local path inside a message: '/' at the start or after a space, quote, bracket,
# '=' or ':' followed by a space (so 's3://bucket/key' and 'units/s' are left alone).
ABSOLUTE_PATH = re.compile(r"(?:^|(?<=[\s'\"(\[=,]))/[^\s'\"()\[\],;]+")


def new_token() -> str:
    return secrets.token_urlsafe(32)


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Access:
    """The token check and the origin check, as an aiohttp middleware."""

    def __init__(self, token: str | None = None) -> None:
        self.token = token or new_token()
        self.bind_host = "127.0.0.1"

    def refusal(self, request: web.Request) -> str | None:
        """Why `request` is refused, or None when it may proceed."""
        addressed = URL(f"http://{request.host}").host if request.host else None
        if is_loopback(self.bind_host) and not is_loopback(addressed):
            return (f"host {request.host!r} is not this machine; this server listens on "
                    f"{self.bind_host} only")
        origin = request.headers.get("Origin")
        if origin is not None:
            expected = f"{request.scheme}://{request.host}".lower()
            if origin.lower() != expected:
                return f"requests from origin {origin!r} are not accepted (only from {expected})"
        given = request.query.get("token", "")
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return ("missing or wrong token: open the address `iws teleop` printed at start "
                    "(it ends in ?token=...)")
        return None

    @web.middleware
    async def middleware(self, request: web.Request,
                         handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                         ) -> web.StreamResponse:
        if not request.path.startswith(PUBLIC_PREFIXES):
            reason = self.refusal(request)
            if reason is not None:
                raise web.HTTPForbidden(text=f"403 forbidden: {reason}\n")
        return await handler(request)


def display_name(location: str | None) -> str | None:
    """What a page may be told about a file or URI: its last component, never where it lives."""
    if location is None:
        return None
    name = PurePosixPath(location.rstrip("/")).name
    return name or location


def scrub_paths(text: str) -> str:
    """`text` with each absolute local path cut to its last component (for messages to pages)."""
    return ABSOLUTE_PATH.sub(lambda match: PurePosixPath(match.group(0)).name or "/", text)
