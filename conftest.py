"""Test-session set-up: reliable headless notebook execution for nbmake (xdist workers too)."""

import matplotlib

matplotlib.use("Agg")

from inferlab import headless  # noqa: E402

headless.install()
