"""Evaluation jobs behind `iws eval`: output writers shared by its subcommands."""
