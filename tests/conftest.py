"""The test session opts in to diffmbs's global settings (float64, XLA CPU options), as a
program using diffmbs does once at its start (``import diffmbs`` alone changes nothing)."""

import diffmbs

diffmbs.configure()

