"""The command line's parts (see ``inspector.cli``)."""
