"""The Markdown parser of chat messages: a line break typed or written is a line break,
and a link says where it goes.

CommonMark joins lines that are not separated by a blank line (a *soft* break renders as
a space). That suits documents, not chats: a user's Ctrl+J, a poem pasted or imported, a
model's one sentence per line would all run together. Every soft break of the parsed text
is made a hard one, so it is drawn as a new line. Code blocks are unaffected: their text
is not inline Markdown and keeps its lines anyway.

Textual's ``Markdown`` draws a soft break as a space whatever the parser's ``breaks``
option says, so the tokens themselves are changed, by a rule run after the inline parse.

Links are not opened on click (``MessageView``), and a terminal shows no status bar on
hover: a ``[friendly text](elsewhere)`` link written by a model would hide its target.
So its address follows its text, in brackets, unless the text is the address already.

A table is drawn as a grid of one widget per cell, so its cost grows with its cells: a
runaway reply's table of thousands of cells would hold the app up while it is built and
laid out, and take memory for every cell, and no one reads such a grid on a terminal anyway. A table of more than
``MOST_TABLE_CELLS`` cells is shown as its own text instead, in a code block (one widget
whatever its size, columns kept as written, wide lines scrolled sideways).
"""

from __future__ import annotations

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token

MOST_TABLE_CELLS = 1_000
"""Cells of a table drawn as a grid; a larger one is drawn as plain text."""


def keep_soft_breaks(state: StateCore) -> None:
    """Make every soft break of the parsed inline text a hard break."""
    for token in state.tokens:
        for child in token.children or ():
            if child.type == "softbreak":
                child.type = "hardbreak"


def show_link_targets(state: StateCore) -> None:
    """Write each link's address after its text, unless its text already is the address."""
    for token in state.tokens:
        if not token.children:
            continue
        children: list[Token] = []
        href: str | None = None
        text = ""
        for child in token.children:
            children.append(child)
            if child.type == "link_open":
                href, text = str(child.attrs.get("href", "")), ""
            elif child.type == "link_close" and href is not None:
                if href and text.strip() not in (href, href.removeprefix("mailto:"), href.split("://", 1)[-1]):
                    children.append(Token("text", "", 0, content=f" ({href})"))
                href = None
            elif href is not None:
                text += child.content
        token.children = children


def plain_big_tables(state: StateCore) -> None:
    """Replace each table of more than ``MOST_TABLE_CELLS`` cells by a code block of its text."""
    tokens = state.tokens
    if not any(token.type == "table_open" for token in tokens):
        return
    lines = state.src.split("\n")
    out: list[Token] = []
    at = 0
    while at < len(tokens):
        token = tokens[at]
        end = at
        if token.type == "table_open":
            end = next((i for i in range(at, len(tokens)) if tokens[i].type == "table_close"), len(tokens) - 1)
        cells = sum(1 for t in tokens[at:end] if t.type in ("th_open", "td_open"))
        if token.type == "table_open" and token.map and cells > MOST_TABLE_CELLS:
            first, last = token.map
            block = Token("code_block", "code", 0, content="\n".join(lines[first:last]) + "\n", map=[first, last],
                          block=True)
            out.append(block)
            at = end + 1
            continue
        out.append(token)
        at += 1
    state.tokens = out


def chat_parser() -> MarkdownIt:
    """A GitHub-like parser whose single line breaks stay line breaks and whose links
    show where they go."""
    parser = MarkdownIt("gfm-like", {"breaks": True})
    parser.core.ruler.push("keep_soft_breaks", keep_soft_breaks)
    parser.core.ruler.push("show_link_targets", show_link_targets)
    parser.core.ruler.push("plain_big_tables", plain_big_tables)
    return parser
