"""A huge Markdown table is drawn as its text, in one block; a table of a readable size
stays a table."""

from __future__ import annotations

from textual.widgets._markdown import MarkdownFence, MarkdownTable

from sessions.store import SessionStore
from sessions.store.records import NewMessage
from tests.tui.helpers import screen_text, wait_for
from tui.startup import StartupRequest
from tui.widgets.chat_markdown import MOST_TABLE_CELLS, chat_parser
from tui.widgets.message_view import MessageView


def table(rows: int, columns: int) -> str:
    lines = ["| " + " | ".join(f"h{c}" for c in range(columns)) + " |", "|" + "---|" * columns]
    lines += ["| " + " | ".join(f"{r}.{c}" for c in range(columns)) + " |" for r in range(rows)]
    return "\n".join(lines)


BLOCKS = {"paragraph_open", "table_open", "code_block"}


def blocks(markdown: str) -> list[str]:
    """The kinds of the top blocks of ``markdown`` as parsed for a chat."""
    return [token.type for token in chat_parser().parse(markdown) if token.type in BLOCKS]


def test_a_table_of_a_readable_size_stays_a_table():
    columns = 10
    rows = MOST_TABLE_CELLS // columns - 1  # with its header row: at the limit
    assert blocks("before\n\n" + table(rows, columns) + "\n\nafter") == ["paragraph_open", "table_open",
                                                                          "paragraph_open"]


def test_a_table_past_the_limit_is_its_own_text_in_a_block():
    columns = 10
    rows = MOST_TABLE_CELLS // columns  # one row more than the limit
    source = table(rows, columns)
    assert blocks("before\n\n" + source + "\n\nafter") == ["paragraph_open", "code_block", "paragraph_open"]
    block = next(t for t in chat_parser().parse(source) if t.type == "code_block")
    assert block.content == source + "\n"  # the columns as written, nothing lost


async def test_a_reply_holding_a_huge_table_is_drawn_with_few_widgets(make_app, fake_model):
    store = SessionStore.open()
    try:
        session = store.create_session(title="table")
        ids = store.add_messages(session.id, [NewMessage(parent=None, role="user", text="a big table"),
                                              NewMessage(parent=0, role="assistant", text=table(2000, 200))])
        store.set_active_leaf(session.id, ids[-1])
    finally:
        store.close()
    app = make_app(startup=StartupRequest(session_id=session.id, model_path=fake_model))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: any("more characters not shown here" in line for line in screen_text(app)),
                       "the reply drawn")
        reply = app.screen.conversation_view.view_for(ids[-1])
        assert isinstance(reply, MessageView)
        assert not reply.query(MarkdownTable) and len(reply.query(MarkdownFence)) == 1
        assert len(reply.query("*")) < 20
        assert reply.query_one(MarkdownFence).code.startswith("| h0 | h1 | h2 |")
