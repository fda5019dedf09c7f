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
The page itself, whose address holds the token, is sent with headers that keep it to itself
(`page_headers`): not cached, not framed, no Referer, only its own script and style.
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
HOST_PORT = re.compile(r"[A-Za-z0-9.\-]+(:[0-9]+)?|\[[0-9A-Fa-f:.]+\](:[0-9]+)?")  # nothing a policy could parse
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


def page_headers(host: str) -> dict[str, str]:
    """For the page, whose address carries the token: it is never cached, framed by another
    site or named in a Referer, and runs only the package's own script and style (`host`, the
    address it was asked for, is where its socket goes: not every browser counts ws: as 'self')."""
    socket = f" ws://{host} wss://{host}" if HOST_PORT.fullmatch(host) else ""
    policy = ("default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self'",
              f"connect-src 'self'{socket}", "base-uri 'none'", "form-action 'none'",
              "frame-ancestors 'none'")
    return {"Content-Security-Policy": "; ".join(policy), "X-Frame-Options": "DENY",
            "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff"}


def display_name(location: str | None) -> str | None:
    """What a page may be told about a file or URI: its last component, never where it lives."""
    if location is None:
        return None
    name = PurePosixPath(location.rstrip("/")).name
    return name or location


def scrub_paths(text: str) -> str:
    """`text` with each absolute local path cut to its last component (for messages to pages)."""
    return ABSOLUTE_PATH.sub(lambda match: PurePosixPath(match.group(0)).name or "/", text)
