"""SIGTERM on a headless shape run before Locust's handler is in: end the shape, or let the quit go on."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from swarm.live import sigterm


class _Greenlet:
    def __init__(self, dead=False):
        self.dead = dead
        self.killed = False

    def kill(self, block=True):
        self.killed = True


@pytest.fixture
def watched(monkeypatch):
    installed = []
    monkeypatch.setattr(
        sigterm.locust_fixes, "watch_sigterm_before_locust", lambda h: installed.append(h) or "w"
    )
    return installed


def test_a_running_shape_is_ended(watched):
    shape = _Greenlet()
    s = sigterm.ShapeSigterm(SimpleNamespace(shape_greenlet=shape), lambda: True)
    assert watched == [s.on_sigterm] and s.watcher == "w"
    s.on_sigterm()
    assert shape.killed


@pytest.mark.parametrize(("shape", "began"), [(_Greenlet(dead=True), False), (None, True)])
def test_after_the_shape_the_quit_goes_on(watched, monkeypatch, shape, began):
    monkeypatch.setattr(sigterm.os, "kill", lambda *a: pytest.fail("the process must not be killed"))
    s = sigterm.ShapeSigterm(SimpleNamespace(shape_greenlet=shape), lambda: began)
    s.on_sigterm()


def test_watched_only_on_a_headless_shape_run(watched):
    def env(shape_class, headless):
        return SimpleNamespace(shape_class=shape_class, parsed_options=SimpleNamespace(headless=headless))

    runner = SimpleNamespace()
    assert sigterm.watch_if_needed(env(None, True), runner, bool) is None
    assert sigterm.watch_if_needed(env(object, False), runner, bool) is None
    assert sigterm.watch_if_needed(env(object, True), runner, bool) is not None
