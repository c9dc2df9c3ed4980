"""Wake-ups for long-poll consumes, over Redis pub/sub.

Scripts that make jobs ready PUBLISH on the queue's ready channel. Each process
keeps one subscriber connection per pool, owned by one listener thread, and
subscribes to a queue's channel only while some request of this process waits
on that queue. A waiter registers (and the subscription is confirmed) *before*
its next consume attempt, so a job made ready in between still wakes it; it
also re-polls every SAFETY_POLL_S in case a message was lost to a reconnect.
"""
from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Iterator

import redis

log = logging.getLogger(__name__)
SAFETY_POLL_S = 1.0
SUBSCRIBE_WAIT_S = 1.0
IDLE_UNSUBSCRIBE_S = 30.0
LISTEN_SLICE_S = 0.05


class Listener:
    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._waiters: dict[str, set[threading.Event]] = defaultdict(set)
        self._confirmed: dict[str, threading.Event] = {}
        self._idle_since: dict[str, float] = {}
        self._requests: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lmstfy-wakeup", daemon=True)
        self._thread.start()

    @contextlib.contextmanager
    def waiting(self, channels: list[str], event: threading.Event | None = None) -> Iterator[threading.Event]:
        """Set `event` (a new one by default) whenever a job becomes ready on a channel."""
        event = event or threading.Event()
        confirmations = []
        with self._lock:
            for channel in channels:
                self._waiters[channel].add(event)
                self._idle_since.pop(channel, None)
                if channel not in self._confirmed:
                    self._confirmed[channel] = threading.Event()
                    self._requests.put(channel)
                confirmations.append(self._confirmed[channel])
        try:
            for confirmed in confirmations:
                confirmed.wait(SUBSCRIBE_WAIT_S)
            yield event
        finally:
            with self._lock:
                for channel in channels:
                    self._waiters[channel].discard(event)
                    if not self._waiters[channel]:
                        self._idle_since[channel] = time.monotonic()

    def stop(self) -> None:
        """End the listener thread (its pool's client was replaced) and wake its waiters."""
        self._stopped.set()
        self._wake_everyone_and_forget_subscriptions()

    def _run(self) -> None:
        while not self._stopped.is_set():
            pubsub = self._client.pubsub(ignore_subscribe_messages=False)
            try:
                self._listen(pubsub)
            except redis.RedisError as exc:
                if self._stopped.is_set():
                    return
                log.warning("wake-up listener lost Redis (%s); reconnecting", exc)
                self._wake_everyone_and_forget_subscriptions()
                self._stopped.wait(0.5)
            finally:
                with contextlib.suppress(Exception):
                    pubsub.close()

    def _listen(self, pubsub) -> None:
        pubsub.subscribe("lq:wakeup-listener")  # keeps the connection in subscribe mode
        while not self._stopped.is_set():
            self._apply_requests(pubsub)
            message = pubsub.get_message(timeout=LISTEN_SLICE_S)
            if message is None:
                continue
            channel = message["channel"].decode()
            if message["type"] == "subscribe":
                with self._lock:
                    confirmed = self._confirmed.get(channel)
                if confirmed is not None:
                    confirmed.set()
            elif message["type"] == "message":
                with self._lock:
                    waiters = list(self._waiters.get(channel, ()))
                for event in waiters:
                    event.set()

    def _apply_requests(self, pubsub) -> None:
        wanted = []
        while True:
            try:
                wanted.append(self._requests.get_nowait())
            except queue.Empty:
                break
        if wanted:
            pubsub.subscribe(*wanted)
        now = time.monotonic()
        with self._lock:
            idle = [c for c, since in self._idle_since.items() if now - since > IDLE_UNSUBSCRIBE_S]
            for channel in idle:
                del self._idle_since[channel]
                self._confirmed.pop(channel, None)
                self._waiters.pop(channel, None)
        if idle:
            pubsub.unsubscribe(*idle)

    def _wake_everyone_and_forget_subscriptions(self) -> None:
        with self._lock:
            for waiters in self._waiters.values():
                for event in waiters:
                    event.set()
            channels = list(self._confirmed)
            self._confirmed = {channel: threading.Event() for channel in channels}
        for channel in channels:
            self._requests.put(channel)


_listeners: dict[str, Listener] = {}
_listeners_lock = threading.Lock()


def listener(pool: str, client: redis.Redis) -> Listener:
    with _listeners_lock:
        found = _listeners.get(pool)
        if found is None:
            found = _listeners[pool] = Listener(client)
        return found


def reset() -> None:
    """Stop every listener (pools.reset_clients replaced the clients they use)."""
    with _listeners_lock:
        listeners = list(_listeners.values())
        _listeners.clear()
    for found in listeners:
        found.stop()
