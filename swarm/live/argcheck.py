"""`python -m swarm.live.argcheck [LOCUST OPTIONS...]`: check Locust options as a swarm worker would.

`swarm run` hands the options given after `--` to Locust. It asks this checker first, in a
process of its own (importing Locust monkey-patches the standard library), so that a bad
option is one line and exit code 2 before any process starts. The checker parses with
Locust's own parser, the swarm's options registered as in every swarm locustfile, and validates
the values as the user and the shape do at start-up. Prints the complaint alone on stdout.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import NoReturn

from swarm.core.errors import EXIT_USAGE, UsageError


def main(argv: list[str]) -> int:
    from locust.argument_parser import get_parser

    from swarm.live.user import LLMUser, _validate

    parser = get_parser(default_config_files=[])

    def error(message: str) -> NoReturn:
        print(message, flush=True)
        sys.exit(EXIT_USAGE)

    parser.error = error  # type: ignore[method-assign]
    opts = parser.parse_args(argv)
    user = type("CheckedUser", (LLMUser,), {"workload": opts.workload or "mixed", "abstract": False})
    env = SimpleNamespace(parsed_options=opts, user_classes=[user], host=opts.host)
    try:
        _validate(env)  # (every option parsed: swarm/live/settings.py)
    except UsageError as e:
        error(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
