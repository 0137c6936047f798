"""Fixtures of the lab tests: fault injection through a test's own shims (tests/integration/helpers.py)."""

from tests.integration.helpers import sbatch_shim, shims, slow_lock

__all__ = ["sbatch_shim", "shims", "slow_lock"]  # fixtures
