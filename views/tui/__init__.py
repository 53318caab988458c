"""The Textual terminal UI: one module per tab, the app in app.py, styles in app.tcss."""
