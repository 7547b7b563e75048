"""Plane Sweeping baseline (Suzanne et al., §5.3.3, after Piatov & Helmer): see ``plane_sweeping``."""
