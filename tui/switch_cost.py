"""What making the message under the tree's cursor live would cost, said before it is chosen.

The plan comes from the controller (``plan_choice``): tokens kept, restored from
checkpoints and evaluated, and the seconds this machine's measured speeds give. Planning a
branch whose tokens are not known yet tokenizes it first (a long imported chat), so it
runs in a thread worker; only the answer for the message still under the cursor is shown.
While a job holds the engine there is no plan to read, and the line says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.dom import DOMNode

from sessions.api.chat import SessionController
from sessions.errors import LlamachatError
from sessions.units import human_size
from tui.screens.chat_rules import about

if TYPE_CHECKING:
    from sessions.api.chat import RoutePlan


def cost_words(plan: RoutePlan | None, *, live: bool = False) -> str:
    """The cost of going to a message, in a line short enough for a narrow panel."""
    if live:
        return "here: the branch shown now"
    if plan is None:
        return "cost of going here: known once the model is idle"
    if not plan.tokens_to_evaluate and not plan.tokens_restored:
        return "going here: nothing to restore or evaluate"
    parts = []
    if plan.tokens_restored:
        size = f" ({human_size(plan.bytes_restored)})" if plan.bytes_restored >= 100_000 else ""
        parts.append(f"restore {plan.tokens_restored:,} tokens{size}")
    if plan.tokens_to_evaluate:
        parts.append(f"evaluate {plan.tokens_to_evaluate:,}")
    return f"going here: {', '.join(parts)} ({about(plan.estimate_seconds)})"


class SwitchCosts:
    """Plans the message under the cursor in a worker and shows the answer."""

    def __init__(self, node: DOMNode, controller: SessionController, show: Callable[[str], None]) -> None:
        self._node = node
        self._controller = controller
        self._show = show
        self._wanted: int | None = None
        """The message whose cost is to be shown (answers for others arrive late: dropped)."""

    def request(self, message_id: int) -> None:
        """Show what choosing ``message_id`` would cost, once it is known."""
        self._wanted = message_id
        snapshot = self._controller.snapshot()
        head = snapshot.head if snapshot is not None else None
        if head is not None and message_id == head.id:
            self._show(cost_words(None, live=True))
            return
        self._node.run_worker(lambda: self._plan(message_id), thread=True, exclusive=True, group="switch-cost",
                              exit_on_error=False, description="planning the switch")

    def refresh(self) -> None:
        """Ask again for the message under the cursor (a job that held the engine has ended)."""
        if self._wanted is not None:
            self.request(self._wanted)

    def _plan(self, message_id: int) -> None:
        try:
            plan = self._controller.routes.plan_choice(message_id)
        except LlamachatError:  # no model, a chat changed or unreadable, a template that fails
            words = ""  # no cost to tell: the line is left empty
        else:
            words = cost_words(plan)
        self._node.app.call_from_thread(self._answer, message_id, words)

    def _answer(self, message_id: int, words: str) -> None:
        if message_id == self._wanted:
            self._show(words)
