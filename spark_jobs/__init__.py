"""Placeholder package: filled in by a later issue (see README, Roadmap)."""
