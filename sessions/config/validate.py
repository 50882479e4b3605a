"""Turn a parsed TOML mapping into a ``Config``, one field at a time.

A config file is edited by hand, so one mistake must cost only the setting it touches:
each field is checked on its own and a bad one falls back to its default while every
other field is kept. Problems carry the field name and, when it can be found, the line,
so the message tells the user exactly what to fix.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from sessions.config import template_kwargs
from sessions.config.model import CheckpointConfig, Config
from sessions.config.model_tables import check_models
from sessions.config.presets import check_presets
from sessions.config.sizes import parse_size, size_text
from sessions.config.toml_text import find_key_line
from sessions.config.type_words import kind_of
from sessions.llama.cache_types import CACHE_TYPES
from sessions.llama.offload import ALL, AUTO
from sessions.rpc.endpoints import EndpointError, parse_endpoints
from sessions.sampling import BOUNDS as SAMPLING_BOUNDS
from sessions.sampling import SamplingSettings


@dataclass(frozen=True)
class ConfigProblem:
    """Something wrong in the config file; the program still starts with defaults for it."""

    message: str
    """What is wrong, in plain words, naming the field."""
    field: str | None = None
    """Dotted name of the field concerned (``sampling.top_k``), None for the whole file."""
    line: int | None = None
    """1-based line in the file, when known."""
    fatal: bool = False
    """True when the whole file was ignored (a syntax error); False for one field or key."""

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line else ""
        return f"{where}{self.message}"


@dataclass(frozen=True)
class Rule:
    """The type and allowed range of one setting."""

    kind: str
    """One of ``int``, ``float``, ``bool``, ``str``, ``str_list``, ``str_map``,
    ``endpoints`` (a list of ``host:port``), ``float_list``, ``gpu_layers`` (a whole
    number, ``"auto"`` or ``"all"``), ``template_kwargs`` (a table of strings, finite
    numbers and truth values), ``size`` (bytes: ``"20GiB"``, ``"500MB"`` or a whole
    number of MiB in the file, see ``sizes``)."""
    minimum: float | None = None
    maximum: float | None = None
    optional: bool = False
    """The field may be absent (None); TOML has no null, so absence is the only way."""
    choices: tuple[str, ...] = ()
    """For ``str``: the values allowed (any case), when not any string."""


INT32_MAX = 2**31 - 1
UINT32_MAX = 2**32 - 1
MAX_CONTEXT = 2**24
"""16,777,216 tokens: above any trained context (10M is the longest), far below the
uint32 that llama.cpp keeps it in (4294967296 wraps silently to 0, the model's own)."""
MAX_BATCH = 2**16
"""Tokens per decode call; llama.cpp allocates its batch for this many up front (a
value past uint32 wraps, and a huge one aborts it inside the allocation)."""
MIN_BATCH = 2
"""The context keeps two sequences (the live one and a spare), and llama.cpp reserves an
output per sequence in every batch: a batch of 1 aborts it (``GGML_ASSERT(n_outputs_max
<= cparams.n_outputs_max)``) as the context is made."""
MIN_CONTEXT = MIN_BATCH
"""The smallest context besides 0 (the model's own): the batch follows a smaller context
down, so a context of 1 aborts llama.cpp as a batch of 1 does."""
GGML_MAX_THREADS = 512
"""llama.cpp's own limit; its thread pool crashes past it (threads = 100000: SIGSEGV)."""


def max_threads(cpus: int | None = None) -> int:
    """Threads worth asking for on this machine: four per core, within llama.cpp's limit."""
    cpus = cpus if cpus is not None else (os.cpu_count() or 1)
    return min(GGML_MAX_THREADS, max(8, 4 * cpus))


TOP_RULES: dict[str, Rule] = {
    "model": Rule("str", optional=True),
    "model_dirs": Rule("str_list"),
    "n_ctx": Rule("int", minimum=0, maximum=MAX_CONTEXT),
    "n_batch": Rule("int", minimum=MIN_BATCH, maximum=MAX_BATCH),
    "n_gpu_layers": Rule("gpu_layers", minimum=-1, maximum=INT32_MAX),
    "threads": Rule("int", minimum=1, maximum=max_threads(), optional=True),
    "cache_type_k": Rule("str", choices=CACHE_TYPES),
    "cache_type_v": Rule("str", choices=CACHE_TYPES),
    "rpc": Rule("endpoints"),
    "tensor_split": Rule("float_list", minimum=0.0),
    "seed": Rule("int", minimum=-1, maximum=UINT32_MAX),
    "system_prompt": Rule("str", optional=True),
    "theme": Rule("str"),
    "tree_width": Rule("int", minimum=8, maximum=1000, optional=True),
    "keys": Rule("str_map"),
    "chat_template_file": Rule("str", optional=True),
    "chat_template_kwargs": Rule("template_kwargs"),
    "undo_minutes": Rule("float", minimum=0.0, maximum=10_000_000.0, optional=True),
}

TABLES: dict[str, tuple[type, dict[str, Rule]]] = {
    "sampling": (
        SamplingSettings,
        {  # the ranges settings read back from a session are held to as well
            name: Rule(type(getattr(SamplingSettings(), name)).__name__, minimum=low, maximum=high)
            for name, (low, high) in SAMPLING_BOUNDS.items()
        },
    ),
    "checkpoints": (
        CheckpointConfig,
        {
            "ram_mb": Rule("int", minimum=0, maximum=2**40),
            "max_disk": Rule("size"),
            "disk_mb": Rule("int", minimum=0, maximum=2**40),
            "interval": Rule("int", minimum=1, maximum=INT32_MAX),
            "parked_mb": Rule("int", minimum=0, maximum=2**40),
            "enabled": Rule("bool"),
        },
    ),
}

LEGACY_KEYS: dict[tuple[str, str], tuple[str, Callable[[Any], Any]]] = {
    ("checkpoints", "disk_mb"): ("max_disk", lambda mb: mb << 20),
}
"""Keys of a table that set another of its fields, as earlier versions wrote it:
(table, key) -> (the field, how the key's checked value becomes the field's). When both
are written, the field wins and the old key is reported as ignored."""

_TYPE_WORDS = {
    "int": "a whole number",
    "float": "a number",
    "bool": "true or false",
    "str": "a string",
    "str_list": "a list of strings",
    "str_map": "a table of strings",
    "endpoints": 'a list of "host:port" strings',
    "float_list": "a list of numbers",
    "gpu_layers": 'a number of layers, "auto" or "all"',
}


def check_value(rule: Rule, value: Any) -> tuple[Any, str | None]:
    """Return ``(value, None)`` when valid (converted: ints become floats), else the reason."""
    if rule.kind == "size":
        return parse_size(value)
    if rule.kind == "template_kwargs":  # its reason names the value at fault
        reason = template_kwargs.problem(value)
        return (None, reason) if reason else (value, None)
    ok = {
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "str": isinstance(value, str),
        "str_list": isinstance(value, list) and all(isinstance(v, str) for v in value),
        "str_map": isinstance(value, dict) and all(isinstance(v, str) for v in value.values()),
        "endpoints": isinstance(value, list) and all(isinstance(v, str) for v in value),
        "float_list": isinstance(value, list)
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value),
        "gpu_layers": (isinstance(value, int) and not isinstance(value, bool))
        or (isinstance(value, str) and value.strip().lower() in (AUTO, ALL)),
    }[rule.kind]
    if not ok:
        return None, f"must be {_TYPE_WORDS[rule.kind]}, not {kind_of(value)} ({value!r})"
    if rule.kind == "float":
        if isinstance(value, int) and _too_big_for_float(value):  # float() would raise OverflowError
            return None, _out_of_range(rule, value)
        value = float(value)
        if not math.isfinite(value):  # TOML writes them as nan and inf
            return None, f"must be a finite number, not {value!r}"
    if rule.kind == "endpoints":
        try:
            return list(parse_endpoints(value)), None
        except EndpointError as error:
            return None, f"must be a list of \"host:port\" strings: {error}"
    if rule.kind == "gpu_layers" and isinstance(value, str):
        return value.strip().lower(), None
    if rule.choices:
        word = value.strip().lower()
        if word not in rule.choices:
            return None, f"must be one of {', '.join(rule.choices)}, not {value!r}"
        return word, None
    if rule.kind == "float_list":
        if any(isinstance(v, int) and _too_big_for_float(v) for v in value) or not all(
                math.isfinite(v) for v in value):
            return None, f"must hold finite numbers, not {value!r}"
        if any(v < (rule.minimum or 0) for v in value):
            return None, f"must hold numbers of at least {rule.minimum:g}, not {value!r}"
        return [float(v) for v in value], None
    if rule.minimum is not None and value < rule.minimum:
        return None, f"must be at least {_bound(rule.minimum)}, not {value!r}"
    if rule.maximum is not None and value > rule.maximum:
        return None, f"must be at most {_bound(rule.maximum)}, not {value!r}"
    return value, None


def _too_big_for_float(value: int) -> bool:
    """Whether ``float(value)`` overflows: a file can hold 1 followed by 400 zeros."""
    try:
        float(value)
    except OverflowError:
        return True
    return False


def _out_of_range(rule: Rule, value: int) -> str:
    """The usual bound sentence, with the digits counted: the number itself fills a screen."""
    bound = rule.maximum if value > 0 else rule.minimum
    try:
        shown = f"a number of {len(str(abs(value)))} digits"
    except ValueError:  # past Python's limit on converting an int to text
        shown = "a number of thousands of digits"
    if bound is None:
        return f"must be a finite number, not {shown}"
    return f"must be {'at most' if value > 0 else 'at least'} {_bound(bound)}, not {shown}"


def _bound(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


class _Checker:
    """Collects problems while building values, looking up line numbers in the text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.problems: list[ConfigProblem] = []

    def report(self, path: tuple[str, ...], message: str) -> None:
        line = find_key_line(self.text, path)
        self.problems.append(ConfigProblem(message, ".".join(path), line))

    def values(self, data: dict[str, Any], rules: dict[str, Rule], prefix: tuple[str, ...],
               defaults: Any) -> dict[str, Any]:
        accepted: dict[str, Any] = {}
        for name, value in data.items():
            path = prefix + (name,)
            rule = rules.get(name)
            if rule is None:
                known = list(rules) + ([] if prefix else list(TABLES))
                close = difflib.get_close_matches(name, known, n=1)
                hint = f"did you mean {close[0]!r}?" if close else "misspelt?"
                self.report(path, f"unknown setting {'.'.join(path)!r} ignored ({hint})")
                continue
            checked, reason = check_value(rule, value)
            if reason:
                field, field_rule = name, rule
                if path in LEGACY_KEYS:
                    field = LEGACY_KEYS[path][0]
                    field_rule = rules[field]
                self.report(path, f"{'.'.join(path)} {reason}; using the default "
                                  f"({shown_value(field_rule, getattr(defaults, field))})")
                continue
            accepted[name] = checked
        return accepted

    def legacy_keys(self, table: str, written: dict[str, Any], accepted: dict[str, Any]) -> None:
        """Turn the old keys of ``table`` into the fields they set (see ``LEGACY_KEYS``)."""
        for (where, old), (field, convert) in LEGACY_KEYS.items():
            if where != table or old not in written:
                continue
            value = accepted.pop(old, None)
            if field in written:
                self.report((table, old), f"{table}.{old} is ignored because {table}.{field} is set too; "
                                          "keep one of the two")
            elif value is not None:
                accepted[field] = convert(value)


def shown_value(rule: Rule, value: Any) -> str:
    """A setting's value as the file would write it, for a message."""
    if value is None:
        return "unset"
    return repr(size_text(value)) if rule.kind == "size" else repr(value)


def build_config(data: dict[str, Any], text: str) -> tuple[Config, list[ConfigProblem]]:
    """Build a ``Config`` from parsed TOML, keeping every valid field."""
    checker = _Checker(text)
    defaults = Config()
    top = {name: value for name, value in data.items() if name not in TABLES and name not in ("models", "presets")}
    values = checker.values(top, TOP_RULES, (), defaults)
    for table, (cls, rules) in TABLES.items():
        if table not in data:
            continue
        if not isinstance(data[table], dict):
            checker.report((table,), f"{table} must be a table ([{table}]), not "
                           f"{kind_of(data[table])}; using the defaults")
            continue
        accepted = checker.values(data[table], rules, (table,), cls())
        checker.legacy_keys(table, data[table], accepted)
        values[table] = cls(**accepted)
    if "models" in data:  # per-model tables, named by the user: see model_tables
        values["models"] = check_models(data["models"], checker.report)
    if "presets" in data:  # sampling presets, named by the user: see presets
        values["presets"] = check_presets(data["presets"], checker.report)
    if values.get("model") == "":
        values["model"] = None
    _context_floor(values, checker)
    _batch_within_context(values, checker)
    return Config(**values), checker.problems


def _context_floor(values: dict[str, Any], checker: _Checker) -> None:
    """``n_ctx`` is 0 (the model's own) or at least ``MIN_CONTEXT``; a range rule cannot say
    "0, or 2 and more", so it is checked here."""
    n_ctx = values.get("n_ctx")
    if n_ctx is not None and 0 < n_ctx < MIN_CONTEXT:
        checker.report(("n_ctx",), f"n_ctx must be 0 (the model's own context) or at least {MIN_CONTEXT}, "
                                   f"not {n_ctx}; using {Config().n_ctx}")
        del values["n_ctx"]


def _batch_within_context(values: dict[str, Any], checker: _Checker) -> None:
    """``n_batch`` no larger than a fixed ``n_ctx``: llama.cpp would cut it down on its own
    while the engine kept splitting prompts at the larger size. A batch left at its
    default simply follows a small context; one the user set is reported."""
    defaults = Config()
    n_ctx = values.get("n_ctx", defaults.n_ctx)
    n_batch = values.get("n_batch", defaults.n_batch)
    if n_ctx and n_batch > n_ctx:
        if "n_batch" in values:
            checker.report(("n_batch",), f"n_batch ({n_batch}) must not be larger than n_ctx ({n_ctx}); "
                                         f"using {n_ctx}")
        values["n_batch"] = n_ctx


def rules_cover_every_field() -> bool:
    """Every ``Config`` field has a rule (a test keeps it so when fields are added)."""
    names = {f.name for f in fields(Config)}
    table_fields = all({f.name for f in fields(cls)} == set(rules) - {old for where, old in LEGACY_KEYS
                                                                      if where == table}
                       for table, (cls, rules) in TABLES.items())
    return names == set(TOP_RULES) | set(TABLES) | {"models", "presets"} and table_fields
