"""Views render a Report (or the chip table); they never call jax or recompute a figure."""
