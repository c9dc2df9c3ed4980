"""The one outbound HTTP function of push delivery (and of webhook alerts).

- urllib3 directly, one process-wide pool of keep-alive connections;
- connect timeout at most 1 s; the whole answer must arrive within `timeout_ms`
  (a watchdog ends requests at their deadline: socket timeouts bound each read,
  not a receiver that drips its headers or body a few bytes at a time);
- no redirects (a 3xx is an answer like any other non-2xx);
- Standard Webhooks signing (webhook-id / webhook-timestamp / webhook-signature);
- SSRF guard: only http/https, and the address actually connected to (after DNS
  resolution, so DNS rebinding cannot slip through) must be public unless
  LMSTFY_ALLOW_PRIVATE_CALLBACKS=1;
- the answer's body is read up to MAX_RESPONSE_BYTES.
`send()` never raises: failures come back as an error class.
"""
from __future__ import annotations

import base64
import contextlib
import hashlib
import heapq
import hmac
import ipaddress
import itertools
import socket
import threading
import time
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

import urllib3
from django.conf import settings
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import HTTPError, MaxRetryError, SSLError
from urllib3.exceptions import TimeoutError as Urllib3Timeout

MAX_RESPONSE_BYTES = 64 * 1024
MAX_CONNECT_S = 1.0
USER_AGENT = "lmstfy-notifier/1.0"


class CallbackRefused(ValueError):
    """The URL may not be called: wrong scheme, or it resolves to a private address."""


def address_is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def private_allowed() -> bool:
    return bool(settings.LMSTFY_ALLOW_PRIVATE_CALLBACKS)


def check_callback_url(url: str) -> None:
    """Refuse a URL that is not http(s) or whose host resolves to a non-public
    address (at topic save; `send` checks the connected address again)."""
    check_scheme(url)
    parts = urlsplit(url)
    if private_allowed():
        return
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80),
                                   type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise CallbackRefused(f"cannot resolve {parts.hostname!r}: {exc.strerror}") from None
    for info in infos:
        if not address_is_public(info[4][0]):
            raise CallbackRefused(f"{parts.hostname!r} resolves to {info[4][0]}, a private, loopback or "
                                  "link-local address (set LMSTFY_ALLOW_PRIVATE_CALLBACKS=1 to allow)")


class BlockedAddress(urllib3.exceptions.NewConnectionError):
    pass


class _PeerCheck:
    """Checks the address the socket really connected to."""

    def _new_conn(self):
        sock = super()._new_conn()
        peer = sock.getpeername()[0]
        if not private_allowed() and not address_is_public(peer):
            sock.close()
            raise BlockedAddress(self, f"refused to call {peer}: not a public address")
        return sock

    def getresponse(self, *args, **kwargs):
        deadline = getattr(_local, "deadline", None)
        if deadline is not None:
            _watchdog.attach(deadline, self.sock)
        return super().getresponse(*args, **kwargs)


class _GuardedHTTPConnection(_PeerCheck, urllib3.connection.HTTPConnection):
    pass


class _GuardedHTTPSConnection(_PeerCheck, urllib3.connection.HTTPSConnection):
    pass


class _GuardedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _GuardedHTTPConnection


class _GuardedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPSConnection


_local = threading.local()


class _Deadline:
    __slots__ = ("at", "done", "expired", "sock")

    def __init__(self, at: float) -> None:
        self.at, self.sock, self.expired, self.done = at, None, False, False


class _Watchdog:
    """One thread per process that shuts down the socket of a request still
    running at its deadline, so the blocked read returns at once."""

    RESOLUTION_S = 0.02   # deadlines are enforced this late at most; bounds the thread's wake-ups

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Deadline]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def start(self, at: float) -> _Deadline:
        deadline = _Deadline(at)
        with self._cond:
            earliest = not self._heap or at < self._heap[0][0]
            heapq.heappush(self._heap, (at, next(self._seq), deadline))
            if self._thread is None or not self._thread.is_alive():   # first use, or after a fork
                self._thread = threading.Thread(target=self._run, name="delivery-watchdog", daemon=True)
                self._thread.start()
            elif earliest:
                self._cond.notify()
        _local.deadline = deadline
        return deadline

    def attach(self, deadline: _Deadline, sock) -> None:
        with self._cond:
            deadline.sock = sock
            if deadline.expired:
                _shut(sock)

    def finish(self, deadline: _Deadline) -> None:
        _local.deadline = None
        with self._cond:
            deadline.done, deadline.sock = True, None

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                while self._heap and self._heap[0][0] <= now:
                    deadline = heapq.heappop(self._heap)[2]
                    if not deadline.done:
                        deadline.expired = True
                        if deadline.sock is not None:
                            _shut(deadline.sock)
                wait = self._heap[0][0] - now if self._heap else None
                self._cond.wait(None if wait is None else max(wait, self.RESOLUTION_S))


def _shut(sock) -> None:
    # socket.socket's own shutdown, also for an SSLSocket: its override would
    # drop the SSL object under the thread still reading.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


_watchdog = _Watchdog()


_pools_lock = threading.Lock()
_pools: urllib3.PoolManager | None = None
POOL_CONNECTIONS_PER_HOST = 64


def _pool_manager() -> urllib3.PoolManager:
    """One process-wide, thread-safe pool of keep-alive connections (urllib3
    directly: requests' own layers cost more per call than the whole send).
    urllib3 reads no proxy from the environment: through a proxy the connected
    peer would be the proxy, and the SSRF guard would check the wrong address."""
    global _pools
    with _pools_lock:
        if _pools is None:
            manager = urllib3.PoolManager(num_pools=64, maxsize=POOL_CONNECTIONS_PER_HOST, block=False,
                                          retries=False)
            manager.pool_classes_by_scheme = {"http": _GuardedHTTPPool, "https": _GuardedHTTPSPool}
            _pools = manager
        return _pools


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """Standard Webhooks v1 signature: base64 HMAC-SHA256 of "{id}.{timestamp}.{body}"."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{message_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


@dataclass(frozen=True)
class Request:
    url: str
    method: str
    body: bytes
    headers: dict[str, str]
    timeout_ms: int


@dataclass(frozen=True)
class Response:
    status: int | None          # None when no answer arrived
    body: bytes                 # at most MAX_RESPONSE_BYTES
    error: str | None           # error class: timeout, connection, blocked_address, invalid_url, ssl, too_large
    duration_ms: int
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def retry_after_s(self) -> float | None:
        value = self.headers.get("retry-after", "").strip()
        if value.isdigit():
            return float(value)
        try:  # or an HTTP-date (RFC 9110 §10.2.3)
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError, IndexError):
            return None


def signed_headers(secret: str, message_id: str, body: bytes, now: float | None = None) -> dict[str, str]:
    timestamp = int(time.time() if now is None else now)
    return {"webhook-id": message_id, "webhook-timestamp": str(timestamp),
            "webhook-signature": sign(secret, message_id, timestamp, body)}


def send(request: Request) -> Response:
    """Send one request; never raises."""
    started = time.monotonic()
    timeout_s = request.timeout_ms / 1000
    deadline = _watchdog.start(started + timeout_s)
    try:
        return _send(request, started, timeout_s, deadline)
    finally:
        _watchdog.finish(deadline)


def _send(request: Request, started: float, timeout_s: float, deadline: _Deadline) -> Response:
    def failed(error: str) -> Response:
        return Response(None, b"", "timeout" if deadline.expired else error,
                        int((time.monotonic() - started) * 1000))

    try:
        check_scheme(request.url)
        answer = _pool_manager().request(
            request.method, request.url, body=request.body or None,
            headers={"User-Agent": USER_AGENT, **request.headers},
            timeout=urllib3.Timeout(connect=min(MAX_CONNECT_S, timeout_s), read=timeout_s),
            redirect=False, retries=False, preload_content=False)
    except CallbackRefused:
        return failed("invalid_url")
    except (HTTPError, ValueError) as exc:
        return failed(_error_class(exc))
    body, error, complete = b"", "timeout", False
    try:
        body, error, complete = _read_capped(answer, started + timeout_s)
    finally:
        _release(answer, reusable=complete and error is None)
    if deadline.expired and error is None and len(body) < MAX_RESPONSE_BYTES:
        error = "timeout"
    headers = {name.lower(): value for name, value in answer.headers.items()}
    return Response(answer.status, body, error, int((time.monotonic() - started) * 1000), headers)


def _error_class(exc: BaseException) -> str:
    reason = exc.reason if isinstance(exc, MaxRetryError) and exc.reason is not None else exc
    if isinstance(reason, BlockedAddress):
        return "blocked_address"
    if isinstance(reason, urllib3.exceptions.NewConnectionError):
        return "connection"  # checked first: urllib3 makes it a subclass of ConnectTimeoutError
    if isinstance(reason, Urllib3Timeout):
        return "timeout"
    if isinstance(reason, SSLError):
        return "ssl"
    if isinstance(reason, (urllib3.exceptions.LocationValueError, ValueError)):
        return "invalid_url"
    return "connection"


def check_scheme(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CallbackRefused("callback URLs must be http:// or https:// with a host")


def _read_capped(answer: urllib3.BaseHTTPResponse, deadline: float) -> tuple[bytes, str | None, bool]:
    """The answer's body up to MAX_RESPONSE_BYTES, an error class, and whether
    the body was read to its end."""
    chunks, size = [], 0
    try:
        while size < MAX_RESPONSE_BYTES:
            chunk = answer.read(8192)
            if not chunk:
                return b"".join(chunks), None, True
            chunks.append(chunk)
            size += len(chunk)
            if time.monotonic() > deadline:
                return b"".join(chunks), "timeout", False
    except (HTTPError, OSError):
        return b"".join(chunks), "timeout", False
    return b"".join(chunks)[:MAX_RESPONSE_BYTES], None, False


def _release(answer: urllib3.BaseHTTPResponse, reusable: bool) -> None:
    """Back to the pool for the next delivery when the answer was read to its
    end; a capped or broken one is closed first (its connection cannot be reused)."""
    with contextlib.suppress(Exception):
        if not reusable:
            answer.close()
        answer.release_conn()
