"""Engines, one module each; importing this package registers them all."""
from harness.adapters.engines import atom, command, sglang, vllm  # noqa: F401  (registers)
from harness.adapters.engines.base import Engine, LaunchContext, ReadyHook, context_for, engine_names, get_engine

__all__ = ["Engine", "LaunchContext", "ReadyHook", "context_for", "engine_names", "get_engine"]
