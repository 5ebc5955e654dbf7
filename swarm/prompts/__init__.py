"""Prompt sets that ship with the swarm (data files; see swarm/workloads.py and make_corpus.py)."""
