"""Tab completion of a typed path, on names alone (the folder is read by the caller)."""

from __future__ import annotations

from pathlib import Path

from tui.path_completion import completed, keeps, split_typed

ENTRIES = [("notes.txt", False), ("numbers.csv", False), ("Novel.md", False), ("other", True), (".hidden", False)]


def test_the_typed_text_splits_into_its_folder_and_the_name_typed(monkeypatch):
    monkeypatch.setenv("HOME", "/home/llama")
    assert split_typed("~/docs/no") == split_typed("/home/llama/docs/no")
    assert split_typed("~/docs/no").folder == Path("/home/llama/docs") and split_typed("~/docs/no").name == "no"
    assert split_typed("~/docs/").name == "" and split_typed("~/docs/").folder == Path("/home/llama/docs")
    assert split_typed("").folder == Path(".")


def test_a_name_completes_to_what_its_matches_share_and_keeps_the_typed_form():
    assert completed("~/docs/not", ENTRIES) == "~/docs/notes.txt"
    assert completed("~/docs/n", ENTRIES) == "~/docs/n"  # notes, numbers: nothing more in common
    assert completed("~/docs/nu", ENTRIES) == "~/docs/numbers.csv"
    assert completed("~/docs/ot", ENTRIES) == "~/docs/other/"  # a folder: the next Tab goes inside
    assert completed("~/docs/zz", ENTRIES) is None


def test_case_counts_unless_only_another_case_matches():
    assert completed("~/docs/No", ENTRIES) == "~/docs/Novel.md"
    assert completed("~/docs/nov", ENTRIES) == "~/docs/Novel.md"


def test_dot_files_wait_for_a_dot():
    assert completed("~/docs/", ENTRIES) == "~/docs/"
    assert completed("~/docs/.h", ENTRIES) == "~/docs/.hidden"
    assert not keeps(".hidden", "") and keeps(".hidden", ".h")


def test_the_list_keeps_the_names_holding_the_text_in_any_case():
    assert [name for name, _ in ENTRIES if keeps(name, "NO")] == ["notes.txt", "Novel.md"]
    assert [name for name, _ in ENTRIES if keeps(name, "")] == ["notes.txt", "numbers.csv", "Novel.md", "other"]
