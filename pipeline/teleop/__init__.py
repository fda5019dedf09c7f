"""Live teleoperation of the world model from a browser tab (`iws teleop`; docs/teleop.md)."""
