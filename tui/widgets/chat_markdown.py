"""The Markdown parser of chat messages: a line break typed or written is a line break.

CommonMark joins lines that are not separated by a blank line (a *soft* break renders as
a space). That suits documents, not chats: a user's Ctrl+J, a poem pasted or imported, a
model's one sentence per line would all run together. Every soft break of the parsed text
is made a hard one, so it is drawn as a new line. Code blocks are unaffected: their text
is not inline Markdown and keeps its lines anyway.

Textual's ``Markdown`` draws a soft break as a space whatever the parser's ``breaks``
option says, so the tokens themselves are changed, by a rule run after the inline parse.
"""

from __future__ import annotations

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore


def keep_soft_breaks(state: StateCore) -> None:
    """Make every soft break of the parsed inline text a hard break."""
    for token in state.tokens:
        for child in token.children or ():
            if child.type == "softbreak":
                child.type = "hardbreak"


def chat_parser() -> MarkdownIt:
    """A GitHub-like parser whose single line breaks stay line breaks."""
    parser = MarkdownIt("gfm-like", {"breaks": True})
    parser.core.ruler.push("keep_soft_breaks", keep_soft_breaks)
    return parser
