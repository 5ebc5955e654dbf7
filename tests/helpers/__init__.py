"""Shared test code: process helpers, hostile servers, stand-ins, test locustfiles, synthetic data, and
the recorded scrapes and runs under data/. Import as `from tests.helpers import support`."""
