"""Unit tests of swarm.analysis."""
