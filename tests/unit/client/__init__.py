"""Unit tests of swarm.client."""
