"""llama.cpp's own chat template cases, read from the llama-cpp-python sdist.

``tests/test-chat-template.cpp`` (under ``vendor/llama.cpp/``) renders one six-message
conversation through each of its ``test_cases`` and states the text llama.cpp's Jinja
path gives (``expected_output_jinja``, else ``expected_output``). The cases are C++
aggregate initialisers; ``cases`` reads them as a C++ compiler would, adjacent string
literals joined included (a missing comma joins two fields, and the fields after it
shift: that is what llama.cpp itself compares against). ``models/templates/`` holds the
real templates llama.cpp tests its chat formats with.

The sdist is found where ``tests/bench/gpu_pack.sh`` keeps it (``pack_cache``); the two
parts used here are extracted once next to it, so that test collection reads small files.
"""

from __future__ import annotations

import os
import re
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TEST_FILE = "vendor/llama.cpp/tests/test-chat-template.cpp"
TEMPLATES = "vendor/llama.cpp/models/templates/"
FIELDS = ("name", "template_str", "expected_output", "expected_output_jinja", "bos_token", "eos_token",
          "supported_with_jinja", "extra_conversation")
CONVERSATION_NAME = "conversation"


def llama_cpp_version() -> str:
    """The llama-cpp-python release pinned in pyproject.toml."""
    found = re.search(r"llama-cpp-python==([0-9.]+)", (REPO / "pyproject.toml").read_text())
    assert found is not None
    return found.group(1)


def pack_cache() -> Path:
    """Where ``tests/bench/gpu_pack.sh`` downloads the sdist."""
    if os.environ.get("LLAMACHAT_PACK_CACHE"):
        return Path(os.environ["LLAMACHAT_PACK_CACHE"])
    base = Path(os.environ["XDG_CACHE_HOME"]) if os.environ.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "llamachat-gpupack"


def sdist_path() -> Path:
    return pack_cache() / f"llama_cpp_python-{llama_cpp_version()}.tar.gz"


def extracted(sdist: Path) -> Path | None:
    """The folder holding the test file and the templates of ``sdist`` (extracted once);
    None when the sdist is not there."""
    name = sdist.name.removesuffix(".tar.gz") + "-chat-templates"
    for folder in (sdist.with_name(name), Path(tempfile.gettempdir()) / f"llamachat-{os.getuid()}-{name}"):
        if (folder / "test-chat-template.cpp").is_file():
            return folder
    if not sdist.is_file():
        return None
    try:
        temp = Path(tempfile.mkdtemp(prefix=".extract-", dir=sdist.parent))
        folder = sdist.with_name(name)
    except OSError:  # a cache one may read but not write: extract into the temp folder
        temp = Path(tempfile.mkdtemp(prefix=".extract-"))
    (temp / "templates").mkdir()
    with tarfile.open(sdist) as archive:
        for member in archive:
            name = member.name.split("/", 1)[-1]
            if not member.isfile():
                continue
            if name == TEST_FILE:
                target = temp / "test-chat-template.cpp"
            elif name.startswith(TEMPLATES) and name.endswith(".jinja") and "/" not in name[len(TEMPLATES):]:
                target = temp / "templates" / Path(name).name
            else:
                continue
            source = archive.extractfile(member)
            assert source is not None
            target.write_bytes(source.read())
    try:
        temp.rename(folder)  # another worker may have been first: its copy is the same
    except OSError:
        for path in sorted(temp.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        temp.rmdir()
    return folder


# -- the C++ initialisers ------------------------------------------------------------------------

_TOKEN = re.compile(r'''
    (?P<space>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<string>(?:u8)?"(?:[^"\\\n]|\\.)*")
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[{}(),])
''', re.VERBOSE | re.DOTALL)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0", "a": "\a",
            "b": "\b", "f": "\f", "v": "\v", "?": "?"}


def _unescape(literal: str) -> str:
    body = literal[literal.index('"') + 1:-1]

    def one(match: re.Match[str]) -> str:
        text = match.group(1)
        if text[0] in "uU":
            return chr(int(text[1:], 16))
        if text[0] == "x":
            return chr(int(text[1:], 16))
        return _ESCAPES[text]

    return re.sub(r"\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|x[0-9a-fA-F]{1,2}|.)", one, body)


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    at = 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise ValueError(f"unexpected C++ at {text[at:at + 40]!r}")
        at = match.end()
        kind = match.lastgroup
        assert kind is not None
        if kind == "space":
            continue
        value = _unescape(match.group()) if kind == "string" else match.group()
        if kind == "string" and out and out[-1][0] == "string":  # adjacent literals are one
            out[-1] = ("string", out[-1][1] + value)
        else:
            out.append((kind, value))
    return out


def _value(tokens: list[tuple[str, str]], at: int) -> tuple[object, int]:
    kind, value = tokens[at]
    if kind == "string":
        return value, at + 1
    if kind == "word" and value == "U8C":  # U8C("...") is the literal
        assert tokens[at + 1] == ("punct", "(") and tokens[at + 3] == ("punct", ")")
        return tokens[at + 2][1], at + 4
    if kind == "word":
        return {"true": True, "false": False}.get(value, value), at + 1
    assert value == "{", tokens[at:at + 5]
    items: list[object] = []
    at += 1
    while tokens[at] != ("punct", "}"):
        item, at = _value(tokens, at)
        items.append(item)
        if tokens[at] == ("punct", ","):
            at += 1
    return items, at + 1


def _initialiser(source: str, opening: str) -> list:
    start = source.index(opening) + len(opening) - 1  # at the brace
    tokens = _tokens(source[start:source.index("};", start) + 1])
    value, _ = _value(tokens, 0)
    assert isinstance(value, list)
    return value


@dataclass(frozen=True)
class Case:
    """One of ``test_cases``: a template, its special tokens, and what llama.cpp renders."""

    name: str
    template_str: str
    expected_output: str
    expected_output_jinja: str = ""
    bos_token: str = ""
    eos_token: str = ""
    supported_with_jinja: bool = True
    extra_conversation: tuple[tuple[str, str], ...] = field(default=())

    @property
    def expected(self) -> str:
        """What llama.cpp's Jinja path renders (``format_using_common``)."""
        return self.expected_output_jinja or self.expected_output


def conversation(source: str) -> list[tuple[str, str]]:
    """The conversation every case renders (``main_automated_tests``)."""
    return [(role, content) for role, content in _initialiser(source, "std::vector<llama_chat_message> conversation {")]


def cases(source: str) -> list[Case]:
    """``test_cases`` in the order written."""
    out = []
    for values in _initialiser(source, "std::vector<TestCase> test_cases {"):
        assert isinstance(values, list)
        fields = dict(zip(FIELDS, values, strict=False))
        fields["extra_conversation"] = tuple(tuple(pair) for pair in fields.get("extra_conversation", ()))
        out.append(Case(**fields))
    return out
