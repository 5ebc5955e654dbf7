"""A login for the Locust web UI on a shared machine: Locust's `--web-login`, with one user.

Locust 2.47's `--web-login` only wires Flask-Login into the web UI: without a user loader and a
login callback from the locustfile every page answers "Locust auth exception". The swarm brings
both (swarm/live/plugin.py calls `install` when the option is on): the user name is
$SWARM_WEB_USERNAME (default `swarm`), the password $SWARM_WEB_PASSWORD, required (the master
refuses to start without it). Both are compared in constant time; the session cookie is signed
with a random key per process (a restarted master logs everyone out). Every page and API of
the UI, the LLM tab's data included, then needs the login; the swarm's `/metrics` stays open for
Prometheus (aggregate numbers and run labels only, no request contents).
"""

from __future__ import annotations

import hmac
import os
import secrets
from typing import Any

from swarm.core.errors import UsageError

USERNAME_ENV = "SWARM_WEB_USERNAME"
PASSWORD_ENV = "SWARM_WEB_PASSWORD"
CALLBACK = "/login_submit"


def install(web_ui: Any) -> None:
    """Make `--web-login` work: a user loader, the login form's callback, a session key."""
    from flask import redirect, request, session, url_for
    from flask_login import UserMixin, login_user

    password = os.environ.get(PASSWORD_ENV) or ""
    if not password:
        raise UsageError(
            f"--web-login needs a password: set ${PASSWORD_ENV} (and ${USERNAME_ENV}, default swarm)"
        )
    username = os.environ.get(USERNAME_ENV) or "swarm"

    class User(UserMixin):
        def __init__(self, user_id: str) -> None:
            self.id = user_id

    web_ui.app.secret_key = secrets.token_bytes(32)
    web_ui.login_manager.user_loader(lambda user_id: User(user_id) if user_id == username else None)
    web_ui.auth_args = {"username_password_callback": CALLBACK}

    def login_submit() -> Any:
        name = (request.form.get("username") or "").encode()
        given = (request.form.get("password") or "").encode()
        ok = hmac.compare_digest(name, username.encode()) & hmac.compare_digest(given, password.encode())
        if ok:
            login_user(User(username))
            return redirect(url_for("locust.index"))
        session["auth_error"] = "Wrong user name or password"
        return redirect(url_for("locust.login"))

    web_ui.app.add_url_rule(CALLBACK, "swarm_login_submit", login_submit, methods=["POST"])
