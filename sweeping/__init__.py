"""Plane Sweeping baseline (paper 001 §5.3.3, after Piatov & Helmer): see ``plane_sweeping``."""
