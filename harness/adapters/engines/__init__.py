"""Engines, one module each; importing this package registers them all."""
from harness.adapters.engines import command  # noqa: F401  (registers)
from harness.adapters.engines.base import Engine, LaunchContext, engine_names, get_engine

__all__ = ["Engine", "LaunchContext", "engine_names", "get_engine"]
