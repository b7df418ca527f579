"""The test session opts in to diffmbs's global settings (float64, XLA CPU options), as a
program using diffmbs does once at its start (``import diffmbs`` alone changes nothing)."""

import os

import pytest

import diffmbs

diffmbs.configure()

SLOW = os.environ.get("DIFFMBS_SLOW_TESTS") == "1"


def pytest_collection_modifyitems(config, items):
    """``slow`` tests (checks another test already makes on a cheaper case) run only with
    ``DIFFMBS_SLOW_TESTS=1`` (``make test-slow``)."""
    if SLOW:
        return
    skip = pytest.mark.skip(reason="slow: DIFFMBS_SLOW_TESTS=1 (make test-slow) runs it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
