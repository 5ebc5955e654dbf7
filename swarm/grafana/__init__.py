"""Grafana: the dashboards as code, the HTTP API (datasource, dashboards, annotations), and the
`swarm dashboards` command. Imports only `swarm.core`.
"""
