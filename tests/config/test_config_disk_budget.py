"""``checkpoints.max_disk``: a size in the units people use, the older ``disk_mb`` still read."""

from __future__ import annotations

import pytest

from sessions import paths
from sessions.config import CheckpointConfig, Config, load_config, save_config, update_config
from sessions.engine.factory import open_checkpoints
from sessions.engine.settings import EngineSettings

GIB, MIB = 1 << 30, 1 << 20


def loaded(text: str):
    path = paths.config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return load_config()


@pytest.mark.parametrize(("written", "budget"), [
    ('"20GiB"', 20 * GIB),
    ('"500MB"', 500_000_000),
    ('"1.5 GiB"', 3 * GIB // 2),
    ('"64kib"', 64 * 1024),
    ("750", 750 * MIB),
    ("0", 0),
])
def test_max_disk_takes_a_size_or_a_number_of_mib(written: str, budget: int) -> None:
    result = loaded(f"[checkpoints]\nmax_disk = {written}\n")
    assert result.problems == []
    assert result.config.checkpoints.max_disk == budget


def test_the_default_is_20_gib_and_a_size_reaches_the_store_and_the_engine_settings() -> None:
    assert Config().checkpoints.max_disk == 20 * GIB
    config = loaded('[checkpoints]\nmax_disk = "3GB"\n').config
    assert EngineSettings.from_config(config).checkpoint_disk_bytes == 3_000_000_000
    store = open_checkpoints(config)
    assert store is not None
    with store:
        assert store.stats().disk_budget == 3_000_000_000


def test_disk_mb_alone_still_sets_the_budget() -> None:
    result = loaded("[checkpoints]\ndisk_mb = 300\n")
    assert result.problems == []
    assert result.config.checkpoints == CheckpointConfig(max_disk=300 * MIB)


def test_with_both_max_disk_wins_and_disk_mb_is_reported_on_its_line() -> None:
    text = '[checkpoints]\nram_mb = 10\ndisk_mb = 300\nmax_disk = "2GiB"\n'
    result = loaded(text)
    assert result.config.checkpoints == CheckpointConfig(ram_mb=10, max_disk=2 * GIB)
    [problem] = result.problems
    assert (problem.field, problem.line, problem.fatal) == ("checkpoints.disk_mb", 3, False)
    assert str(problem) == ("line 3: checkpoints.disk_mb is ignored because checkpoints.max_disk is set too; "
                            "keep one of the two")


@pytest.mark.parametrize(("written", "words"), [
    ('"lots"', "must be a size such as \"20GiB\" or \"500MB\", or a whole number of MiB, not 'lots'"),
    ('"20 parsecs"', "not '20 parsecs'"),
    ('"20"', "not '20'"),
    ("1.5", "not a number (1.5)"),
    ("true", "not a boolean (True)"),
    ("-1", "must be at least 0, not -1"),
    ('"2000000TiB"', "must be at most 1048576TiB, not '2000000TiB'"),
    ("1" + "0" * 40, "must be at most 1048576TiB, not a number of more than 30 digits"),
])
def test_a_bad_size_is_one_sentence_with_its_key_and_line_and_the_default_is_used(written: str, words: str) -> None:
    text = f'theme = "nord"\n\n[checkpoints]\nram_mb = 10\nmax_disk = {written}\n'
    result = loaded(text)
    assert result.config.checkpoints == CheckpointConfig(ram_mb=10)
    assert result.config.theme == "nord"
    [problem] = result.problems
    assert (problem.field, problem.line) == ("checkpoints.max_disk", 5)
    message = str(problem)
    assert message.startswith("line 5: checkpoints.max_disk ") and words in message
    assert message.endswith("; using the default ('20GiB')") and "\n" not in message


def test_a_bad_disk_mb_names_its_own_key() -> None:
    result = loaded("[checkpoints]\ndisk_mb = -5\n")
    assert result.config.checkpoints == CheckpointConfig()
    [problem] = result.problems
    assert str(problem) == "line 2: checkpoints.disk_mb must be at least 0, not -5; using the default ('20GiB')"


def test_written_back_as_a_size_that_reads_the_same() -> None:
    """In the file a bare number is MiB, so a budget in bytes is written with its unit."""
    config = Config(checkpoints=CheckpointConfig(max_disk=3 * GIB))
    path = save_config(config)
    assert 'max_disk = "3GiB"' in path.read_text()
    assert load_config().config == config
    update_config(checkpoints={"max_disk": 1234567})
    assert 'max_disk = "1234567B"' in path.read_text()
    assert load_config().config.checkpoints.max_disk == 1234567
    assert update_config(checkpoints={"max_disk": "750MB"}).checkpoints.max_disk == 750_000_000
    assert 'max_disk = "750MB"' in path.read_text()
