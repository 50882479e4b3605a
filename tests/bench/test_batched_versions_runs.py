"""The batched-versions benchmark runs on a tiny model, and its comparison can tell."""

from __future__ import annotations

import pytest

from sessions.synth import make_model
from tests.bench.batched_versions import measure
from tests.bench.test_branching_runs import shown_quotient


@pytest.mark.engine
def test_a_batch_of_one_is_the_version_alone_and_a_batch_of_two_is_timed():
    """A batch of one sequence decodes as the app does (bit for bit, the same tokens): the
    comparison finds no difference where there is none. A batch of two is timed against
    one version, and each of its versions compared with its seed alone."""
    path = str(make_model("llama"))
    one = measure("llama-tiny", path, n=1, tokens=8, threads=1)
    assert one["logits_bit_identical_steps"] == "8/8"
    assert one["versions_with_other_tokens"] == 0 and one["first_other_token_at"] == {}
    two = measure("llama-tiny", path, n=2, tokens=8, threads=1)
    assert two["versions"] == 2 and two["one_seconds"] > 0 and two["batch_seconds"] > 0
    assert shown_quotient(two["batch_over_one"], two["batch_seconds"], two["one_seconds"], (1e-4, 1e-4, 1e-2))
    assert two["settle_seconds"] > 0
    assert shown_quotient(two["batch_and_settle_over_one"], two["batch_seconds"] + two["settle_seconds"],
                          two["one_seconds"], (2e-4, 1e-4, 1e-2))
    identical, steps = map(int, two["logits_bit_identical_steps"].split("/"))
    assert steps == 16 and 0 <= identical <= steps
    assert two["versions_with_other_tokens"] == len(two["first_other_token_at"]) <= 2
    assert all(0 <= place < 8 for place in two["first_other_token_at"].values())


@pytest.mark.engine
def test_the_app_route_times_one_reply_the_versions_and_their_settling():
    """Through the app's engine: two replies alone, two versions in a batch, and those
    settled, each timed, the quotients per step from the figures printed."""
    two = measure("llama-tiny", str(make_model("llama")), n=2, tokens=8, threads=1)
    assert 1 <= two["app_alone_tokens"] <= 16 and len(two["app_version_tokens"]) == 2
    assert all(0 <= count <= 8 for count in two["app_version_tokens"])
    assert all(two[key] > 0 for key in ("app_alone_seconds", "app_batch_seconds", "app_settle_seconds",
                                         "app_batch_setup_seconds"))
    scale = two["app_alone_tokens"] / (max(two["app_version_tokens"]) or 1)  # per step, against one token's
    batch, settled = two["app_batch_seconds"], two["app_batch_seconds"] + two["app_settle_seconds"]
    for shown, seconds in ((two["app_batch_over_one"], batch), (two["app_batch_and_settle_over_one"], settled)):
        assert shown_quotient(shown, seconds * scale, two["app_alone_seconds"], (2e-4 * scale, 1e-4, 1e-2))
