"""A real local HTTP receiver for the push-delivery tests.

A ThreadingHTTPServer on 127.0.0.1 (random port, HTTP/1.1 keep-alive) that
records every request it gets (method, path, headers, raw body, time) and
answers as the test scripted it, per path:

    receiver.fail(2, status=500)                       # two 500s, then the default 200
    receiver.answer(status=200, json={"code": 1})      # the next answer
    receiver.answer(hang_s=5)                          # hang (cut short at teardown)
    receiver.answer(status=429, headers={"Retry-After": "120"})
    receiver.answer(status=302, headers={"Location": "/elsewhere"})
    receiver.answer(drip=[b"x" * 100] * 50, drip_gap_s=0.05)   # slow body
    receiver.always(Reply(hang_s=10), path="/slow")    # every answer on /slow

Scripted answers are used once each, in order; then the path's `always`
answer, then the default (200, empty body). `max_concurrent` is the most
requests ever being handled at the same time.
"""
from __future__ import annotations

import json as jsonlib
import sys
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANY_PATH = "*"


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    hang_s: float = 0.0                 # wait this long before answering
    drip: tuple[bytes, ...] = ()        # send the body in these pieces ...
    drip_gap_s: float = 0.0             # ... this far apart (Content-Length announces the total)
    header_drip_gap_s: float = 0.0      # send the status line and headers one byte at a time

    @classmethod
    def json(cls, value: object, status: int = 200, **kwargs) -> Reply:
        headers = {"Content-Type": "application/json", **kwargs.pop("headers", {})}
        return cls(status=status, body=jsonlib.dumps(value).encode(), headers=headers, **kwargs)


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]      # names lower-cased
    body: bytes
    at: float                    # time.time() when the request was complete
    at_monotonic: float

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


class Receiver:
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.max_concurrent = 0
        self.connections = 0
        self._in_flight = 0
        self._lock = threading.Condition()
        self._scripted: dict[str, deque[Reply]] = defaultdict(deque)
        self._always: dict[str, Reply] = {}
        self._stopping = threading.Event()
        self.server = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="test-receiver", daemon=True)

    # -- set up --------------------------------------------------------------------------
    def start(self) -> Receiver:
        self._thread.start()
        return self

    def unblock(self) -> None:
        """Cut running and future hangs and drips short (before stopping a notifier)."""
        self._stopping.set()

    def stop(self) -> None:
        self._stopping.set()          # cuts hangs and drips short
        self.server.shutdown()
        self.server.server_close()

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def answer(self, reply: Reply | None = None, path: str = ANY_PATH, **kwargs) -> None:
        """Script the next answer (on `path`, or on any path)."""
        with self._lock:
            self._scripted[path].append(reply or Reply(**kwargs))

    def fail(self, times: int, status: int = 500, path: str = ANY_PATH, **kwargs) -> None:
        for _ in range(times):
            self.answer(Reply(status=status, **kwargs), path=path)

    def always(self, reply: Reply, path: str = ANY_PATH) -> None:
        with self._lock:
            self._always[path] = reply

    # -- read back -------------------------------------------------------------------------
    def received(self, path: str | None = None) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if path is None or r.path == path]

    def wait_for(self, count: int, timeout_s: float = 5.0, path: str | None = None) -> list[Recorded]:
        """Wait until `count` requests (on `path`) arrived; return them (maybe fewer on timeout)."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while True:
                got = [r for r in self.requests if path is None or r.path == path]
                left = deadline - time.monotonic()
                if len(got) >= count or left <= 0:
                    return got
                self._lock.wait(left)

    # -- the handler's side ----------------------------------------------------------------
    def _take_reply(self, path: str) -> Reply:
        with self._lock:
            for key in (path, ANY_PATH):
                if self._scripted[key]:
                    return self._scripted[key].popleft()
            return self._always.get(path) or self._always.get(ANY_PATH) or Reply()

    def _record(self, recorded: Recorded) -> None:
        with self._lock:
            self.requests.append(recorded)
            self._in_flight += 1
            self.max_concurrent = max(self.max_concurrent, self._in_flight)
            self._lock.notify_all()

    def _done(self) -> None:
        with self._lock:
            self._in_flight -= 1


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def handle_error(self, request, client_address) -> None:
        # A client hanging up (a timeout, a blocked address) is part of the tests.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _handler_for(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            with receiver._lock:
                receiver.connections += 1

        def log_message(self, format, *args) -> None:
            pass  # keep test output quiet

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            path = self.path.split("?", 1)[0]
            receiver._record(Recorded(self.command, self.path, {k.lower(): v for k, v in self.headers.items()},
                                      body, time.time(), time.monotonic()))
            try:
                self._reply(receiver._take_reply(path))
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
            finally:
                receiver._done()

        def _reply(self, reply: Reply) -> None:
            if reply.hang_s and receiver._stopping.wait(reply.hang_s):
                self.close_connection = True
                return
            body = b"".join(reply.drip) if reply.drip else reply.body
            head = [f"HTTP/1.1 {reply.status} {self.responses.get(reply.status, ('',))[0]}"]
            head += [f"{name}: {value}" for name, value in reply.headers.items()]
            head += [f"Content-Length: {len(body)}", "", ""]
            raw_head = "\r\n".join(head).encode("latin-1")
            if reply.header_drip_gap_s:
                for i in range(len(raw_head)):
                    self.wfile.write(raw_head[i:i + 1])
                    self.wfile.flush()
                    if receiver._stopping.wait(reply.header_drip_gap_s):
                        self.close_connection = True
                        return
            else:
                self.wfile.write(raw_head)
            if not reply.drip:
                self.wfile.write(body)
                return
            for piece in reply.drip:
                self.wfile.write(piece)
                self.wfile.flush()
                if receiver._stopping.wait(reply.drip_gap_s):
                    self.close_connection = True
                    return

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

    return Handler
