"""Test settings: hypothesis without per-example deadlines (timing on a shared 2-core machine is noise, not a bug)."""

from hypothesis import settings

settings.register_profile("inferlab", deadline=None)
settings.load_profile("inferlab")
