"""``llamachat show ID``: a session's whole conversation tree, one message per line.

Indentation follows the branching depth: a reply that is the only child of its parent
stays at its parent's level (a long linear chat stays readable), while alternatives
(edits, regenerations, forks) are indented under the message they branch from and
numbered [i/n]; what follows an alternative lines up after its label. Messages on the
active branch are marked with * in the first column.
"""

from __future__ import annotations

import argparse

from sessions.cli.arguments import session_id
from sessions.cli.context import CommandContext
from sessions.cli.formatting import iso_time, local_time, one_line, title_text
from sessions.tree import ConversationTree, Message


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("show", help="print a session's conversation tree",
                                   description=__doc__.split("\n\n", 1)[1])
    parser.add_argument("id", type=session_id, metavar="ID", help="session id")
    parser.add_argument("--json", action="store_true",
                        help="print the session and all its messages as JSON")
    return parser


def _labelled(messages: list[Message]) -> list[tuple[Message, str]]:
    if len(messages) < 2:
        return [(m, "") for m in messages]
    return [(m, f"[{i}/{len(messages)}] ") for i, m in enumerate(messages, 1)]


def tree_lines(tree: ConversationTree, active: set[int]) -> list[str]:
    """The outline of ``tree``, depth first in creation order (iterative: chats are deep).

    Alternatives are indented two columns under the message they branch from; the
    replies that follow an alternative line up under its text, after the ``[i/n]`` label.
    The first column holds ``*`` for messages on the active branch.
    """
    lines: list[str] = []
    stack = [(pair, 0) for pair in reversed(_labelled(tree.roots()))]
    while stack:
        (message, label), indent = stack.pop()
        mark = "*" if message.id in active else " "
        lines.append(f"{mark} {' ' * indent}{label}#{message.id} {message.role}: "
                     f"{one_line(message.text)}")
        children = tree.children(message.id)
        below = indent + len(label) + (2 if len(children) > 1 else 0)
        stack.extend((pair, below) for pair in reversed(_labelled(children)))
    return lines


def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    store = ctx.store()
    session = store.get_session(args.id)
    tree = store.load_tree(args.id)
    leaf = session.active_leaf_id
    active = {m.id for m in tree.path_to(leaf)} if leaf is not None and leaf in tree else set()
    if args.json:
        ctx.print_json({
            "session": {
                "id": session.id, "title": session.title,
                "created_at": iso_time(session.created_at),
                "updated_at": iso_time(session.updated_at),
                "model_path": session.model_path, "system_prompt": session.system_prompt,
                "sampling": session.sampling.to_dict(), "active_leaf_id": leaf,
            },
            "messages": [
                {"id": m.id, "parent": m.parent_id, "role": m.role, "text": m.text,
                 "created_at": iso_time(m.created_at), "active": m.id in active,
                 "stats": m.stats.to_dict() if m.stats else None}
                for m in store.messages(args.id)
            ],
        })
        return 0
    count = len(tree)
    plural = "" if count == 1 else "s"
    ctx.print(f"session {session.id}: {title_text(session.title)}  "
              f"({count} message{plural}, updated {local_time(session.updated_at)})")
    for line in tree_lines(tree, active):
        ctx.print(line)
    return 0
