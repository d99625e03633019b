"""Detectors on the event stream (``detectors``) and their thresholds (``thresholds``): events in,
``Finding`` events out, the same code for chat, attach and replay. See docs/diagnose.md."""

from specterm.diagnose.detectors import Diagnoser, diagnosing
from specterm.diagnose.thresholds import Thresholds

__all__ = ["Diagnoser", "Thresholds", "diagnosing"]
