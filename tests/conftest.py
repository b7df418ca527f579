"""The test session opts in to diffmbs's global settings (float64, XLA CPU options), as a
program using diffmbs does once at its start (``import diffmbs`` alone changes nothing)."""

import diffmbs

diffmbs.configure()


def pytest_collection_modifyitems(config, items):
    """Tests of an ``xdist_group`` (the programs they share make each group one long unit of
    work under ``--dist loadgroup``) first, the rest in their order: long units scheduled last
    left one worker running them alone at the end of ``make test``."""
    items.sort(key=lambda item: item.get_closest_marker("xdist_group") is None)
