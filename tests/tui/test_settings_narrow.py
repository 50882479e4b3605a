"""The chat settings dialog in a narrow terminal shows every sampling value whole.

The sampling fields sit in a grid of two label-and-box pairs per row. At 40 columns that
left each box one or two columns, so the dialog showed top-p 0.95 as "0", 1024 max tokens
as "10" and the seed -1 as "-": values that read as other values. In a narrow terminal the
fields now take one pair per row.
"""

from __future__ import annotations

import pytest
from textual.widgets import Input

from tests.tui.helpers import ready, wait_for
from tui.screens.settings_dialog import FIELDS, ChatSettingsScreen

LONGEST = 8
"""Room for any value a user types often ("0.95", "1024", "1234567")."""


@pytest.mark.parametrize("width", [40, 59, 60, 100])
async def test_every_sampling_value_has_room_to_be_read(make_app, width):
    app = make_app()
    async with app.run_test(size=(width, 40)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, ChatSettingsScreen), "the settings dialog")
        await pilot.pause()
        dialog = app.screen
        for name in FIELDS:
            box = dialog.query_one(f"#settings-{name}", Input)
            assert box.content_region.width >= LONGEST, (name, box.content_region.width)
            assert box.region.right <= dialog.query_one("#dialog").region.right
