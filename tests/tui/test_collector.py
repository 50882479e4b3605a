"""The app's process collects cycles in full ten times less often than Python does.

A full pass of the collector stops the UI thread for as long as it walks every live object
of the app; while a reply streamed they came every second or so (docs/benchmarks.md has
the lag with and without)."""

from __future__ import annotations

import gc

from tests.tui.helpers import ready
from tui.app import FULL_COLLECTION_AFTER


async def test_the_app_sets_full_collections_ten_times_rarer(make_app):
    saved = gc.get_threshold()
    gc.set_threshold(saved[0], saved[1], 10)  # Python's own, whatever the test run set
    try:
        app = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            await ready(pilot)
            assert gc.get_threshold() == (saved[0], saved[1], FULL_COLLECTION_AFTER)
    finally:
        gc.set_threshold(*saved)
