"""The Pallas kernel library: each kernel beside its pure-jnp reference."""
