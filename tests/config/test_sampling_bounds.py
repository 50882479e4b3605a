"""Sampling settings read back from the session database keep the config file's bounds.

``SamplingSettings.from_dict`` is how the store reads a session's settings; those values
go to llama.cpp through ctypes, where a ``c_int32`` wraps an out-of-range top-k or seed
without a word and a NaN temperature reaches the sampler chain. A damaged value is
refused there, as the store's ``DatabaseDamaged``, and a ``Sampler`` refuses one made
some other way before it builds anything.
"""

from __future__ import annotations

import math

import pytest

from sessions.config.validate import TABLES
from sessions.sampling import BOUNDS, SamplingSettings
from sessions.store import SessionStore
from sessions.store.errors import DatabaseDamaged
from tests.store.test_store_damaged_rows import damage, two_sessions

OUT_OF_RANGE = ['{"top_k": 4294967296}', '{"seed": 4294967296}', '{"seed": -2}', '{"temperature": NaN}',
                '{"top_p": Infinity}', '{"min_p": -0.5}', '{"repeat_last_n": -5}', '{"max_tokens": 0}',
                '{"repeat_penalty": 1e308}', '{"top_k": 2147483648}']


def test_the_config_file_is_held_to_the_same_bounds(tmp_path):
    """The config's ``[sampling]`` rules are made from ``BOUNDS``: each setting takes its
    limits and is refused one step past either, with the kind of number it is."""
    from sessions.config import load_config

    rules = TABLES["sampling"][1]
    assert set(rules) == set(BOUNDS)
    for name, (low, high) in BOUNDS.items():
        kind = type(getattr(SamplingSettings(), name))
        assert rules[name].kind == kind.__name__
        step = 1 if kind is int else 0.5
        for value, refused in ((low, False), (high, False), (low - step, True), (high + step, True)):
            path = tmp_path / f"{name}.toml"
            path.write_text(f"[sampling]\n{name} = {kind(value)!r}\n", encoding="utf-8")
            problems = load_config(path).problems
            assert bool(problems) is refused, (name, value, problems)


@pytest.mark.parametrize("stored", OUT_OF_RANGE)
def test_an_out_of_range_stored_setting_is_the_store_error(stored):
    damaged, healthy, _ = two_sessions()
    damage("UPDATE sessions SET sampling = ? WHERE id = ?", stored, damaged)
    name = stored.split('"')[1]
    with SessionStore.open() as store:
        with pytest.raises(DatabaseDamaged, match=f"the sampling settings of session {damaged} cannot be read "
                                                  f"\\(sampling setting {name} is "):
            store.get_session(damaged)
        assert store.get_session(healthy).title == "healthy"


@pytest.mark.parametrize("end", [0, 1], ids=["low", "high"])
def test_values_at_the_bounds_are_kept(end):
    """Every setting, each at its own bound, is read back as stored, not refused or changed."""
    stored = {name: bounds[end] for name, bounds in BOUNDS.items()}
    read = SamplingSettings.from_dict(stored)
    assert {name: getattr(read, name) for name in BOUNDS} == stored


@pytest.mark.parametrize("change", [{"top_k": 2**32}, {"seed": 2**40}, {"temperature": math.nan},
                                    {"min_p": math.inf}])
def test_a_sampler_refuses_settings_out_of_range(change):
    from sessions.llama.sampler import Sampler

    with pytest.raises(ValueError, match=f"^sampling setting {next(iter(change))} "):
        Sampler(SamplingSettings().with_(**change), 32)
