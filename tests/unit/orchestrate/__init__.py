"""Unit tests of swarm.orchestrate."""
