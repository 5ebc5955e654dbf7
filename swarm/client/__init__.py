"""The client side of one request: SSE bytes, server dialects, the stream tally, the receive
clock and the HTTP transport. Imports only `swarm.core`; knows nothing of Locust's runners.
"""
