"""The switch estimate prices batches and replayed replies each at its own, measured speed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessions.branching.planner import STEP_PRIOR, CostModel, Plan, SegmentInfo, SnapshotInfo, with_speeds
from sessions.controller.branch_tokens import BranchTokens
from sessions.controller.switch_estimate import TokenCounts, priced, size_prior, stored_rates, token_counts
from sessions.engine.chat_engine import route_plan
from sessions.engine.reports import Rates, RoutePlan
from sessions.llama.decode_speeds import BATCH_MIN, SAMPLES, DecodeSpeeds
from sessions.tree import GenerationStats

# system 100 tokens, user 50, a generated reply 200, user 50
BRANCH = BranchTokens(tokens=list(range(400)), ends=[100, 150, 350, 400], stepped=[False, False, True, False])
RECORDED = Path(__file__).parents[1] / "data" / "switch_timings.json"
SHOWN = 0.1
"""Seconds below which a switch reads as immediate (``under 1 s`` either way): a ratio
of two such times says nothing a user could see."""


def plan(evaluate_from: int, cost: CostModel, restore=(), snapshot=None) -> RoutePlan:
    """The planner's plan, as the engine hands it over."""
    return route_plan(Plan(keep=0, restore=restore, evaluate_from=evaluate_from, target_len=400,
                           logits_source="decode", cost=cost, snapshot=snapshot))


def test_tokens_are_counted_by_how_they_are_decoded():
    assert token_counts(BRANCH, 0) == TokenCounts(batched=200, stepped=200)
    assert token_counts(BRANCH, 250) == TokenCounts(batched=50, stepped=100)
    assert token_counts(BRANCH, 400) == TokenCounts(0, 0)


def test_each_kind_of_call_measures_its_own_rate():
    speeds = DecodeSpeeds()
    assert speeds.batched is None and speeds.step is None
    speeds.record(512, 0.512)  # 1 ms a token in a batch
    speeds.record(4, 0.4)  # too few tokens to say either rate: a call's fixed cost would count per token
    speeds.record(1, 0.005)  # 5 ms a token alone
    assert speeds.batched == pytest.approx(1e-3) and speeds.step == pytest.approx(5e-3)
    assert BATCH_MIN > 4


def test_a_few_slow_calls_do_not_move_a_rate():
    speeds = DecodeSpeeds()
    for _ in range(SAMPLES - 4):
        speeds.record(1, 0.002)
    for _ in range(4):  # held up by another program, or a context's first call
        speeds.record(1, 0.5)
    assert speeds.step == pytest.approx(0.002)


def test_the_rate_not_yet_measured_follows_from_the_other():
    speeds = DecodeSpeeds()
    assert with_speeds(CostModel(), speeds) == CostModel()  # nothing measured: the defaults, said so
    assert not CostModel().measured
    speeds.record(1, 0.008)
    only_steps = with_speeds(CostModel(), speeds)
    assert only_steps.measured and only_steps.step_seconds == pytest.approx(0.008)
    assert only_steps.eval_per_token == pytest.approx(0.008 / STEP_PRIOR)


def test_batched_and_replayed_tokens_and_restored_bytes_are_priced_apart():
    cost = CostModel(eval_per_token=1e-3, step_seconds=9e-3, ram_seconds_per_byte=1e-9, disk_seconds_per_byte=4e-9)
    restore = (SegmentInfo(0, 100, "ram", nbytes=1_000_000), SegmentInfo(100, 150, "disk", nbytes=1_000_000))
    snapshot = SnapshotInfo(150, "disk", has_state=True, has_logits=False, nbytes=500_000)
    got = priced(plan(150, cost, restore, snapshot), BRANCH)
    assert got.estimate_seconds == pytest.approx(50 * 1e-3 + 200 * 9e-3 + 1e-3 + 4e-3 + 2e-3)
    assert got.rates == Rates(eval_per_token=1e-3, step_seconds=9e-3, ram_seconds_per_byte=1e-9,
                              disk_seconds_per_byte=4e-9)


def test_before_any_decode_the_chats_stored_replies_give_the_rates():
    mine, other = "model-a", "model-b"
    replies = [
        GenerationStats(tokens_evaluated=200, prompt_seconds=0.4, tokens_generated=100, generation_tps=50.0,
                        sampled_by=mine),
        GenerationStats(tokens_evaluated=100, prompt_seconds=0.2, tokens_generated=80, generation_tps=50.0,
                        sampled_by=mine),
        GenerationStats(tokens_evaluated=300, prompt_seconds=30.0, tokens_generated=90, generation_tps=1.0,
                        sampled_by=other),  # another model's speeds say nothing of this one's
        GenerationStats(tokens_evaluated=3, prompt_seconds=0.3, tokens_generated=2, generation_tps=2.0,
                        sampled_by=mine),  # too short to measure
    ]
    rates = stored_rates(replies, mine, Rates())
    assert rates.measured
    assert rates.eval_per_token == pytest.approx(2e-3) and rates.step_seconds == pytest.approx(0.02)
    assert stored_rates(replies[2:3], mine, Rates()) == Rates()


def recorded_switches() -> list[tuple[str, dict]]:
    """The recorded switches a user would see take time (the others read as immediate,
    whatever the ratio of two milliseconds)."""
    data = json.loads(RECORDED.read_text())
    return [(model, switch) for model, switches in data.items() for switch in switches
            if max(switch["actual_s"], switch["estimate_s"]) >= SHOWN]


def test_the_recordings_cover_the_bench_models_and_a_real_one():
    models = {model for model, _ in recorded_switches()}
    assert {"stories260K.gguf", "gemma3 (bench size)", "lfm2 (bench size)"} <= models


@pytest.mark.parametrize(("model", "switch"), recorded_switches(),
                         ids=[f"{m}: {s['event'][:48]}" for m, s in recorded_switches()])
def test_recorded_switches_took_within_twice_their_estimate(model, switch):
    """Switches timed by ``python -m tests.bench.switch_estimate --record`` (on the bench
    models and stories260K), priced again from what their estimate was made from: the
    rates measured before the switch, and the branch's batched and replayed tokens."""
    branch = BranchTokens(tokens=[0] * switch["target_len"], ends=switch["ends"], stepped=switch["stepped"])
    again = priced(route_plan(Plan(keep=0, restore=tuple(SegmentInfo(**p) for p in switch["restore"]),
                                   evaluate_from=switch["evaluate_from"], target_len=switch["target_len"],
                                   logits_source="decode",
                                   snapshot=SnapshotInfo(**switch["snapshot"]) if switch["snapshot"] else None,
                                   rewind=SnapshotInfo(**switch["rewind"]) if switch["rewind"] else None)),
                   branch, Rates(**switch["cost"]))
    actual = switch["actual_s"]
    assert 0.5 <= actual / again.estimate_seconds <= 2.0, (actual, again.estimate_seconds)


def test_a_reopened_chat_is_priced_at_the_decode_rates_its_replies_recorded():
    """A reply's prompt seconds hold its restores and fixed costs, its generation speed the
    sampling: priced at those, the first switch after a reopen was estimated at 2.5 times
    what it took. The engine's own rates, stored with the reply, are what a switch decodes at."""
    slow = GenerationStats(tokens_evaluated=40, prompt_seconds=0.4, tokens_generated=50, generation_tps=20.0,
                           sampled_by="fp", decode_batch_seconds=0.002, decode_step_seconds=0.02)
    rates = stored_rates([slow] * 3, "fp", Rates())
    assert rates.measured
    assert rates.eval_per_token == pytest.approx(0.002) and rates.step_seconds == pytest.approx(0.02)
    older = GenerationStats(tokens_evaluated=40, prompt_seconds=0.4, tokens_generated=50, generation_tps=20.0,
                            sampled_by="fp")  # stored before the rates were kept: its speeds, as before
    rates = stored_rates([older], "fp", Rates())
    assert rates.eval_per_token == pytest.approx(0.01) and rates.step_seconds == pytest.approx(0.05)


def test_with_nothing_measured_the_rates_follow_the_models_size():
    """Loading the tiny demo model into a chat another model wrote was estimated at 1.3 s and
    took 0.1 s: the one default is a 100M-parameter model's rate."""
    tiny, bench = size_prior(Rates(), 853_120), size_prior(Rates(), 102_940_544)
    assert not tiny.measured
    assert tiny.eval_per_token < Rates().eval_per_token / 5 and tiny.step_seconds < Rates().step_seconds / 10
    assert bench.eval_per_token == pytest.approx(3.9e-3, rel=0.2)
    assert bench.step_seconds == pytest.approx(0.031, rel=0.2)
    measured = Rates(eval_per_token=1.0, step_seconds=2.0, measured=True)
    assert size_prior(measured, 853_120) == measured
