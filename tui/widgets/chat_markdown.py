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
"""

from __future__ import annotations

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token


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


def chat_parser() -> MarkdownIt:
    """A GitHub-like parser whose single line breaks stay line breaks and whose links
    show where they go."""
    parser = MarkdownIt("gfm-like", {"breaks": True})
    parser.core.ruler.push("keep_soft_breaks", keep_soft_breaks)
    parser.core.ruler.push("show_link_targets", show_link_targets)
    return parser
