"""The test suite: tests/unit (in-process, mirrors swarm/), tests/integration (real processes), tests/e2e
(a real vLLM, a real browser). Shared code is in tests.helpers."""
