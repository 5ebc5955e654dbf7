"""The process's connections to one origin, shared by all its users.

Locust gives each user its own FastHttpSession, whose client pool keeps one geventhttpclient
connection pool per origin: a user that sends to several endpoints (`--host A,B`) holds a socket
to each, the idle ones too, until it next uses them. An open loop of 10,000 users over two
simulators (`benchmarks/streams_10k.py --open-loop --sims 2 --streams 10000`) needed 20,000
sockets in its one worker, more than this machine's hard open-file limit allows.

The swarm's requests go out on one pool per origin and process instead, as an HTTP client
library's pool does (aiohttp's connector in `vllm bench serve`, httpx's `Client`): a request takes
the socket most recently given back to that origin, by any user, and a new one only when none is
idle. The sockets to an origin are then its requests in flight at their busiest, not users x
endpoints; and an open loop's user, idle for seconds between its arrivals, no longer finds its own
socket closed by the server's keep-alive timeout and pays a new connection inside its TTFT
(docs/metrics.md). Each user keeps its own head, Host and Authorization lines (swarm/live/
endpoints.py); only the sockets are shared, and only between users of the same settings
(timeouts, TLS, proxy): the pool is the one Locust would have made for the first of them, with no
bound of its own (each user has at most one request in flight: the users bound the sockets).

`carried(pool)`: the sockets of `pool` that have carried a request, shared by its users, so that
one found closed by the server at its next use is retried once on a new connection whoever sent
on it last (swarm/client/transport.py); `new_socket(pool)` is that new connection, never one of the
idle ones: those may be as stale (llama-server closes every streamed connection, and the socket it
closed last is the warmest), where a user's own pool held one idle socket per origin at most.
"""

from __future__ import annotations

import copy
import weakref
from typing import Any

import gevent.queue
from gevent import lock

from swarm.client.addresses import pin_numeric_address

UNBOUNDED = 1 << 30  # the pool's own bound on sockets out at once: none (the users bound them)
_POOLS: dict[tuple[str, frozenset[tuple[str, Any]]], Any] = {}
_CARRIED: weakref.WeakKeyDictionary[Any, weakref.WeakSet[Any]] = weakref.WeakKeyDictionary()


def origin_pool(session: Any, origin: str) -> Any:
    """The process's connection pool for `origin` ("scheme://host:port/") under the settings of
    `session`, a user's FastHttpSession; made from the pool Locust's client would use there."""
    clients = session.client.clientpool  # geventhttpclient's HTTPClientPool: its args are the settings
    key = (origin, frozenset(clients.client_args.items()))
    pool = _POOLS.get(key)
    if pool is None:
        pool = copy.copy(clients.get_client(origin)._connection_pool)
        pool._semaphore = lock.BoundedSemaphore(UNBOUNDED)
        pool._socket_queue = gevent.queue.LifoQueue()  # the warmest socket first
        pool.size = UNBOUNDED
        pin_numeric_address(pool)  # an IP literal: resolved once, not through a thread per connection
        _POOLS[key] = pool
    return pool


def carried(pool: Any) -> weakref.WeakSet[Any]:
    """The sockets of `pool` that have carried a request already (by any user)."""
    used = _CARRIED.get(pool)
    if used is None:
        used = _CARRIED[pool] = weakref.WeakSet()
    return used


def new_socket(pool: Any) -> Any:
    """A new connection from `pool`, never an idle one; counted out (and given back) as
    `pool.get_socket()`'s are."""
    pool._semaphore.acquire()
    try:
        return pool._create_socket()
    except BaseException:
        pool._semaphore.release()
        raise
