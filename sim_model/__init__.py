"""The world model: torch only, never imports ray."""
