"""Log classification: what a server log says about how a launch went (pure, no I/O)."""
from harness.core.classify.classifier import LogClassifier, classify_text
from harness.core.classify.model import Classification, Dialect

__all__ = ["Classification", "Dialect", "LogClassifier", "classify_text"]
