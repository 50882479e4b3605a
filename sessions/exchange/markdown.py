"""A session as a Markdown transcript, for reading and sharing rather than re-importing.

A message's single line breaks are written as Markdown's hard breaks (two spaces at the
end of the line, code blocks left as they are): the app draws them as line breaks, and a
renderer would otherwise join the lines into one (``hard_breaks``).

By default only the active branch is written, as the conversation reads on screen. With
``whole_tree`` every branch is written depth first, and each place where the conversation
splits gets a marker ("Branch 2 of 3 at message 12") so a reader can follow the forks;
message headings carry their ids for those markers to point at.
"""

from __future__ import annotations

import re
from datetime import datetime

from sessions.sampling import SamplingSettings
from sessions.stop_reason import StopReason
from sessions.store import Session, SessionStore
from sessions.tree import ConversationTree, GenerationStats, Message

_ROLE_NAMES = {"system": "System", "user": "User", "assistant": "Assistant"}
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def hard_breaks(text: str) -> str:
    """``text`` with each line break inside a paragraph made a hard break (two spaces
    before it), outside fenced code blocks; lines that already end in one stay."""
    lines = text.split("\n")
    out: list[str] = []
    fence = ""
    for index, line in enumerate(lines):
        opening = _FENCE.match(line)
        if fence:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = ""
        elif opening:
            fence = opening.group(1)
        else:
            after = lines[index + 1] if index + 1 < len(lines) else ""
            if line.strip() and after.strip() and not line.endswith(("  ", "\\")) and not _FENCE.match(after):
                line += "  "
        out.append(line)
    return "\n".join(out)


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds).astimezone().strftime("%Y-%m-%d %H:%M %Z").strip()


def sampling_line(sampling: SamplingSettings) -> str:
    """The chat's sampling settings, as a person would write them down."""
    seed = "a new one each reply" if sampling.seed < 0 else str(sampling.seed)
    return (f"temperature {sampling.temperature:g}, top-k {sampling.top_k}, top-p {sampling.top_p:g}, "
            f"min-p {sampling.min_p:g}, repeat penalty {sampling.repeat_penalty:g}, "
            f"max tokens {sampling.max_tokens}, seed {seed}")


def _stats_line(stats: GenerationStats) -> str:
    parts = []
    if stats.tokens_generated:
        parts.append(f"{stats.tokens_generated} tokens")
    if stats.generation_tps:
        parts.append(f"{stats.generation_tps:.1f} tokens/s")
    if stats.stop_reason and stats.stop_reason != StopReason.EOG:
        parts.append(f"stopped: {stats.stop_reason}")
    return f"*{', '.join(parts)}*" if parts else ""


def _message_block(message: Message, with_id: bool) -> list[str]:
    heading = f"### {_ROLE_NAMES[message.role]}"
    if with_id:
        heading += f" (message {message.id})"
    lines = [heading, "", hard_breaks(message.text.rstrip("\n")), ""]
    if message.stats is not None:
        stats = _stats_line(message.stats)
        if stats:
            lines += [stats, ""]
    return lines


def _header(session: Session) -> list[str]:
    lines = [f"# {session.title or 'Untitled session'}", ""]
    if session.model_path:
        lines.append(f"- Model: `{session.model_path}`")
    lines.append(f"- Sampling: {sampling_line(session.sampling)}")
    lines.append(f"- Started: {_when(session.created_at)}")
    lines.append(f"- Last change: {_when(session.updated_at)}")
    lines.append("")
    if session.system_prompt:
        lines += ["## System prompt", "", hard_breaks(session.system_prompt.rstrip("\n")), ""]
    return lines


def _whole_tree(tree: ConversationTree, head_id: int | None) -> list[str]:
    on_active = set() if head_id is None else {m.id for m in tree.path_to(head_id)}
    lines: list[str] = []
    stack: list[tuple[Message, str]] = []

    def push_children(parent: Message | None) -> None:
        kids = tree.children(None if parent is None else parent.id)
        where = "at the start" if parent is None else f"at message {parent.id}"
        for index in range(len(kids) - 1, -1, -1):
            marker = ""
            if len(kids) > 1:
                active = " (active)" if kids[index].id in on_active else ""
                marker = f"**Branch {index + 1} of {len(kids)} {where}**{active}"
            stack.append((kids[index], marker))

    push_children(None)
    while stack:
        message, marker = stack.pop()
        if marker:
            lines += ["---", "", f"> {marker}", ""]
        lines += _message_block(message, with_id=True)
        push_children(message)
    return lines


def export_markdown(store: SessionStore, session_id: int, *, whole_tree: bool = False) -> str:
    """The active branch as a transcript, or with ``whole_tree`` every branch with markers."""
    session, tree = store.load_session_tree(session_id)  # one read: the head is in the tree
    lines = _header(session)
    head = session.active_leaf_id
    if head is None and len(tree):
        head = tree.resume_leaf(None).id
    if whole_tree:
        lines += _whole_tree(tree, head)
    elif head is not None:
        for message in tree.path_to(head):
            lines += _message_block(message, with_id=False)
    return "\n".join(lines).rstrip("\n") + "\n"
