"""End to end: a real vLLM (installed on first use, once per session) and a real headless browser."""
