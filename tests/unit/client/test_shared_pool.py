"""swarm/client/shared_pool.py: the users of one process share one connection pool per origin and
settings, with no bound of its own; a socket one user gives back is the next one another takes."""

from __future__ import annotations

import argparse

import gevent
import pytest
from gevent.server import StreamServer
from locust.env import Environment

from swarm.client.shared_pool import UNBOUNDED, carried, new_socket, origin_pool
from swarm.live.keyorigin import bind
from swarm.live.user import LLMUser


class _Accepts:
    """A TCP server on loopback that counts its connections and holds them open."""

    def __init__(self) -> None:
        self.count = 0
        self.server = StreamServer(("127.0.0.1", 0), self._handle)
        self.server.start()

    def _handle(self, sock, _addr) -> None:
        self.count += 1
        sock.recv(1)  # until the client closes

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/"


def _serving():
    server = _Accepts()
    yield server
    server.server.stop()  # (the one running at the end: a test may start another)


srv = pytest.fixture(_serving, name="srv")
srv2 = pytest.fixture(_serving, name="srv2")  # a second origin


def _users(hosts: str, n: int, timeout: float = 60.0) -> list[LLMUser]:
    class U(LLMUser):
        host = hosts
        workload = "short_qa"

    opts = argparse.Namespace(model="m", api_key=None, web_host="127.0.0.1", request_timeout=timeout)
    env = Environment(user_classes=[U], host=hosts, parsed_options=opts)
    bind(env, None, (hosts,))
    return [U(env) for _ in range(n)]


def test_users_of_one_origin_share_its_pool_and_each_origin_has_its_own(srv, srv2):
    users = _users(f"{srv.origin},{srv2.origin}", 3)
    pools = {(u.endpoints[0].transport.pool, u.endpoints[1].transport.pool) for u in users}
    assert len(pools) == 1  # every user: the same two pools
    ((pa, pb),) = pools
    assert pa is not pb and pa.size == pb.size == UNBOUNDED
    assert carried(pa) is users[0].endpoints[0].transport._used is users[2].endpoints[0].transport._used
    assert carried(pa) is not carried(pb)
    assert pa._resolve()[0][4] == ("127.0.0.1", srv.server.server_port)  # the IP literal, pinned


def test_another_setting_is_another_pool(srv):
    slow = _users(srv.origin, 1, timeout=60.0)[0].endpoints[0].transport.pool
    quick = _users(srv.origin, 1, timeout=5.0)[0].endpoints[0].transport.pool
    assert slow is not quick and quick.network_timeout == 5.0
    assert _users(srv.origin, 1, timeout=5.0)[0].endpoints[0].transport.pool is quick


def test_a_socket_given_back_by_one_user_is_the_next_another_takes_and_none_waits_for_a_bound(srv):
    first, second = _users(srv.origin, 2)
    pool = first.endpoints[0].transport.pool
    assert second.endpoints[0].transport.pool is pool
    sock = pool.get_socket()
    pool.return_socket(sock)
    assert pool.get_socket() is sock  # the next request, whoever sends it, reuses it
    held = [sock] + [pool.get_socket() for _ in range(40)]  # past Locust's concurrency of 10
    gevent.sleep(0.05)
    assert srv.count == 41 and len({id(s) for s in held}) == 41
    for s in held:
        pool.return_socket(s)
    again = [pool.get_socket() for _ in range(41)]  # all of them idle: no new connection
    gevent.sleep(0.05)
    assert srv.count == 41 and {id(s) for s in again} == {id(s) for s in held}
    for s in again:
        pool.release_socket(s)


def test_a_socket_the_server_closed_while_idle_is_replaced(srv):
    pool = origin_pool(_users(srv.origin, 1)[0].client, srv.origin)
    sock = pool.get_socket()
    pool.return_socket(sock)
    srv.server.stop()  # closes the server's side of it
    srv.server = StreamServer(("127.0.0.1", srv.server.server_port), srv._handle)
    srv.server.start()
    gevent.sleep(0.05)
    fresh = pool.get_socket()
    assert fresh is not sock and sock.fileno() < 0  # the dead one closed, a new one made
    pool.release_socket(fresh)


def test_the_retry_after_a_stale_socket_is_a_new_connection_not_another_idle_one(srv):
    pool = origin_pool(_users(srv.origin, 1)[0].client, srv.origin)
    idle = [pool.get_socket() for _ in range(3)]
    for sock in idle:
        pool.return_socket(sock)
    gevent.sleep(0.05)
    fresh = new_socket(pool)
    gevent.sleep(0.05)
    assert srv.count == 4 and all(fresh is not s for s in idle)  # the three idle ones left waiting
    pool.return_socket(fresh)  # counted out and back as get_socket's are
    assert pool.get_socket() is fresh  # (the warmest, now)
    pool.release_socket(fresh)
