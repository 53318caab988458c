"""The key hints at the bottom: one widget that draws one line of text.

Textual's Footer rebuilds a widget per key on every focus change (so on every tab switch): each
new key is mounted, styled and laid out, a third of a tab switch's CPU time, and (Textual 8) the
old keys stayed alive through a data binding it never dropped. Here a focus change that leaves
the shown keys as they were costs nothing, and one that changes them costs one repaint."""
from __future__ import annotations

from rich.text import Text
from textual import events
from textual.screen import Screen
from textual.widget import Widget


class KeyFooter(Widget, can_focus=False):
    ALLOW_SELECT = False
    COMPONENT_CLASSES = {"footer-key--key", "footer-key--description"}
    DEFAULT_CSS = """
    KeyFooter {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
        .footer-key--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        .footer-key--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
    }
    """

    def __init__(self, context_actions: frozenset[str] = frozenset()) -> None:
        """``context_actions``: the app's actions that are shown only where they apply (the app's
        ``check_action`` hides them elsewhere); like a focused tab's own keys, they come first."""
        super().__init__()
        self.context_actions = context_actions
        self._keys: tuple[tuple[str, str, str, bool, bool], ...] = ()  # key, shown as, description, enabled, in context
        self._spans: list[tuple[int, int, str, bool]] = []  # (from x, to x, key, enabled): for clicks

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen) -> None:
        if not self.is_attached or screen is not self.screen:
            return
        keys, actions = [], set()
        for node, binding, enabled, _tooltip in screen.active_bindings.values():
            # one key per action, as Textual's footer shows them
            if binding.show and binding.action not in actions and binding.key != self.app.COMMAND_PALETTE_BINDING:
                actions.add(binding.action)
                in_context = node is not self.app or binding.action.split("(")[0] in self.context_actions
                keys.append((binding.key, self.app.get_key_display(binding), binding.description, enabled, in_context))
        keys.sort(key=lambda k: not k[4])  # stable: the context's keys first, each group in its order
        palette = screen.active_bindings.get(self.app.COMMAND_PALETTE_BINDING)
        if palette is not None and self.app.ENABLE_COMMAND_PALETTE:
            _node, binding, enabled, _tooltip = palette
            keys.append((binding.key, self.app.get_key_display(binding), binding.description, enabled, False))
        if tuple(keys) != self._keys:
            self._keys = tuple(keys)
            self.refresh()

    def on_resize(self) -> None:
        self.refresh()

    def render(self) -> Text:
        """Every key with its description; where that does not fit, the palette's key goes, then
        the descriptions of the keys that are always there (the context's keep theirs)."""
        palette = self._keys[-1:] if self._keys and self._keys[-1][0] == self.app.COMMAND_PALETTE_BINDING else ()
        keys = self._keys[: len(self._keys) - len(palette)]
        for fit in ("all", "no palette", "compact"):
            line = self._line(keys, palette if fit == "all" else (), compact=fit == "compact")
            if len(line) <= self.size.width:
                break
        return line

    def _line(self, keys, palette, compact: bool) -> Text:
        key_style = self.get_component_rich_style("footer-key--key")
        description_style = self.get_component_rich_style("footer-key--description")
        line, self._spans = Text(no_wrap=True, overflow="crop"), []
        for key, shown, description, enabled, in_context in (*keys, *palette):
            if palette and key == palette[0][0]:  # on the right, as Textual's footer has it
                width = len(shown) + len(description) + 3
                line.append(" " * max(1, self.size.width - len(line) - width - 1))
                line.append("▏", "dim")
            start = len(line)
            short = compact and not in_context
            line.append(f" {shown}" if short else f" {shown} ", key_style)
            if description and not short:
                line.append(f"{description} ", description_style)
            if not enabled:
                line.stylize("dim", start)
            self._spans.append((start, len(line), key, enabled))
        return line

    def on_mouse_down(self, event: events.MouseDown) -> None:
        for start, end, key, enabled in self._spans:
            if start <= event.x < end:
                if enabled:
                    self.app.simulate_key(key)
                else:
                    self.app.bell()
                return
