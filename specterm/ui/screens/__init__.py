"""Screens: the dashboard and the engine error state."""
