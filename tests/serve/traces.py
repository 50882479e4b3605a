"""Request traces shaped like SillyTavern's and Open WebUI's: what each client sends when.

Both send the whole history with every request. A trace is a list of steps; each step
builds its request from the replies the server wrote for the steps before it, as the
client's own state holds them.

SillyTavern (chat completion, a custom OpenAI endpoint): a character card as the system
prompt; a swipe resends the history without the last reply; an edit changes an earlier
message in place and the next request carries everything after it; "continue" by
default moves the partial reply into a system nudge at the end, so the end of the prompt
changes from one continue to the next; with "continue prefill" on, the partial reply is
a trailing assistant message instead.

Open WebUI: no system prompt; each request is the root-to-node path of its own tree, so
regenerate resends the path without the reply, an edit of the first message sends the
edited message alone, and switching back to the first branch sends that branch's path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Replies = dict[str, str]
Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Step:
    name: str
    messages: Callable[[Replies], Messages]
    options: dict[str, Any] = field(default_factory=dict)


def system(text: str) -> dict[str, str]:
    return {"role": "system", "content": text}


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def bot(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


CARD = system("You are Captain Mara, the weathered skipper of a fishing boat on a cold northern sea. "
              "Stay in character and answer in a few sentences.")
U1 = user("Good morning, captain. What does the sea look like today, and will we sail out before noon?")
U1_EDITED = user("Good evening, captain. Is the harbour calm enough tonight for a short trip past the lighthouse?")
U2 = user("Tell me about the storm that nearly sank your boat last winter, and what you learned from it.")
U3 = user("What would you say to a young sailor who wants to join your crew next spring?")
NUDGE = ("[Continue your last message without repeating its original content. Continue from here: {}]")

SILLYTAVERN = [
    Step("greeting", lambda r: [CARD, U1]),
    Step("next turn", lambda r: [CARD, U1, bot(r["greeting"]), U2]),
    Step("swipe", lambda r: [CARD, U1, bot(r["greeting"]), U2]),
    Step("next turn after the swipe", lambda r: [CARD, U1, bot(r["greeting"]), U2, bot(r["swipe"]), U3]),
    Step("edit the first message, then go on", lambda r: [CARD, U1_EDITED, bot(r["greeting"]), U2, bot(r["swipe"]),
                                                          U3, bot(r["next turn after the swipe"]), U1]),
    Step("continue with the nudge", lambda r: [CARD, U1, bot(r["greeting"]), U2, bot(r["swipe"]), U3,
                                               system(NUDGE.format(r["next turn after the swipe"]))]),
    Step("continue again: the nudge moved", lambda r: [
        CARD, U1, bot(r["greeting"]), U2, bot(r["swipe"]), U3,
        system(NUDGE.format(r["next turn after the swipe"] + r["continue with the nudge"]))]),
    Step("continue with prefill", lambda r: [CARD, U1, bot(r["greeting"]), U2, bot(r["swipe"]), U3,
                                             bot(r["next turn after the swipe"][:12])]),
]

OPEN_WEBUI = [
    Step("first question", lambda r: [U1]),
    Step("second question", lambda r: [U1, bot(r["first question"]), U2]),
    Step("regenerate", lambda r: [U1, bot(r["first question"]), U2]),
    Step("edit the first question", lambda r: [U1_EDITED]),
    Step("go on in the edited branch", lambda r: [U1_EDITED, bot(r["edit the first question"]), U3]),
    Step("switch back and go on", lambda r: [U1, bot(r["first question"]), U2, bot(r["regenerate"]), U3]),
    Step("regenerate in the first branch", lambda r: [U1, bot(r["first question"]), U2, bot(r["regenerate"]), U3]),
]

TRACES = {"sillytavern": SILLYTAVERN, "open-webui": OPEN_WEBUI}
