"""swarm/live/endpoints.py: a user holds one transport per endpoint (`--host URL1,URL2`), each with
its own Host header and pool, the API key only at the origins it is bound to (live/keyorigin.py),
and a URL's own user:password as Basic elsewhere."""

from __future__ import annotations

import argparse
import base64

import pytest
from locust.env import Environment

from swarm.live.endpoints import basic_auth
from swarm.live.keyorigin import bind
from swarm.live.user import LLMUser

KEY = "sk-test-0123456789abcdef"
HOSTS = "http://127.0.0.1:18001/,http://u:p%40ss@127.0.0.2:18002/proxy"


class TwoUser(LLMUser):
    host = HOSTS
    workload = "short_qa"


def _user(api_key_origin: str | None, host: str = HOSTS) -> TwoUser:
    opts = argparse.Namespace(model="m", api_key=KEY, api_key_origin=api_key_origin, web_host="127.0.0.1")
    env = Environment(user_classes=[TwoUser], host=host, parsed_options=opts)
    bind(env, None, (host,))
    return TwoUser(env)


def _auth(endpoint) -> str | None:
    for line in endpoint.transport.head.decode("latin-1").split("\r\n"):
        if line.startswith("Authorization: "):
            return line[len("Authorization: ") :]
    return None


def test_each_endpoint_has_its_own_head_label_and_pool_and_locust_sees_the_first():
    user = _user(None)
    a, b = user.endpoints
    assert (a.label, b.label) == ("http://127.0.0.1:18001", "http://127.0.0.2:18002/proxy")
    assert a.url == "http://127.0.0.1:18001/v1/chat/completions"
    assert b.url == "http://127.0.0.2:18002/proxy/v1/chat/completions" and b.prefix == "/proxy"
    assert b"Host: 127.0.0.2:18002\r\n" in b.transport.head and b"u:p" not in b.transport.head
    assert b.transport.head.startswith(b"POST /proxy/v1/chat/completions HTTP/1.1\r\n")
    assert b.transport.head.endswith(b"X-Request-Id: ")  # the request's own id, then Content-Length
    assert a.transport.pool is not b.transport.pool
    assert user.host == "http://127.0.0.1:18001" and user.balancer.labels == (a.label, b.label)


def test_the_key_goes_to_every_endpoint_given_at_start_and_only_there():
    a, b = _user(None).endpoints  # bound to both origins of --host
    assert _auth(a) == _auth(b) == f"Bearer {KEY}"
    a, b = _user("http://127.0.0.2:18002").endpoints  # --api-key-origin names the second only
    assert _auth(a) is None and _auth(b) == f"Bearer {KEY}"
    a, b = _user("http://10.9.9.9:8000").endpoints  # neither: the second still has its own Basic
    assert _auth(a) is None
    assert _auth(b) == "Basic " + base64.b64encode(b"u:p@ss").decode()


@pytest.mark.parametrize(
    ("netloc", "want"),
    [("h:1", None), ("u@h:1", None), ("u:@h:1", None), ("a%3Ab:c@h", base64.b64encode(b"a:b:c").decode())],
)
def test_basic_auth_needs_a_user_and_a_password(netloc, want):
    assert basic_auth(netloc) == (None if want is None else f"Basic {want}")
