"""Textual's footer, without its leak (pinned textual 8): every recompose (each focus change,
so each tab switch) binds the new keys' ``compact`` to the footer with ``data_bind`` and never
drops the old keys' bindings (Textual prunes them only when ``compact`` changes, which it never
does here). Every key ever shown stayed alive: ~10 widgets per tab switch, and Python's full
collections grew with them, to pauses of ~1 s after a few minutes of use."""
from __future__ import annotations

from textual.widgets import Footer


class KeyFooter(Footer):
    async def recompose(self) -> None:
        await super().recompose()
        watchers = getattr(self, "__watchers", {}).get("compact")
        if watchers:  # the same test Textual applies when the value changes
            watchers[:] = [(node, callback) for node, callback in watchers if not node._closing]
