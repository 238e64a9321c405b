"""Fakes at the edges for the UI tests: a seeded monitor with a fixed clock, a model description, a step clock and a
verdict object. Everything behind them (drawing, screens, the app) is the real code."""

from tests.fakes.clock import StepClock
from tests.fakes.model import fake_model_info
from tests.fakes.monitor import T_NOW, FakeMonitor
from tests.fakes.verdicts import FakeVerdict

__all__ = ["T_NOW", "FakeMonitor", "FakeVerdict", "StepClock", "fake_model_info"]
