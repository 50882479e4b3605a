"""The command palette (ctrl+p) lists every action of the app, with its key.

Built from the same table as the bindings (``tui.bindings``), so nothing reachable by a
key is missing from the palette, and a rebound key shows its new binding. Textual's own
system commands (themes, screenshot, quit) stay in the palette beside these.
"""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from tui.bindings import KEYS, KeySpec, current_key


def _method(spec: KeySpec) -> str:
    return "action_" + spec.action.split("(", 1)[0]


class ActionCommands(Provider):
    """Every keyed action that the screen the palette was opened from can run."""

    def _commands(self) -> list[tuple[KeySpec, str]]:
        keymap = getattr(self.app, "keymap", {})
        found = []
        for spec in KEYS:
            node = self._node(spec)
            if node is not None and hasattr(node, _method(spec)):
                found.append((spec, f"{current_key(spec, keymap).split(',')[0]} · [keys] {spec.id}"))
        return found

    def _node(self, spec: KeySpec):
        if spec.place == "app":
            return self.app
        if spec.place in ("input", "tree"):
            found = self.screen.query("ChatInput" if spec.place == "input" else "TreePanel")
            return found.first() if found else None
        return self.screen

    async def _run(self, spec: KeySpec) -> None:
        await self.app.run_action(spec.action, self._node(spec))

    async def discover(self) -> Hits:
        for spec, help_text in self._commands():
            yield DiscoveryHit(spec.description, partial(self._run, spec), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for spec, help_text in self._commands():
            score = matcher.match(spec.description)
            if score > 0:
                yield Hit(score, matcher.highlight(spec.description), partial(self._run, spec), help=help_text)
