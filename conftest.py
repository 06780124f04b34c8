"""Test-session set-up: reliable headless notebook execution for nbmake (workers too)."""

import matplotlib

matplotlib.use("Agg")

import inferlab.headless  # noqa: E402,F401  (applies the nbclient fixes on import)
