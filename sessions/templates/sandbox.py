"""A Jinja2 sandbox that bounds work and memory, not only attribute access.

A chat template comes from the GGUF file, so it is untrusted code. Jinja2's
``ImmutableSandboxedEnvironment`` keeps it away from Python internals (the hole behind
llama-cpp-python's CVE-2024-34359), but it will still run loops nested twenty deep, recurse
exponentially or double a string until the machine runs out of memory. This module adds the
missing bounds, so that a hostile template fails fast with a plain message instead:

- every line the template executes costs a step (a trace hook counts lines in the template's
  own frames only, in the rendering thread only) and a render has a step budget;
- every operation that can multiply text (``*``, ``+``, ``%``, ``~``, block captures, string
  methods and filters such as ``join``, ``replace``, ``center``, ``format``, ``tojson``) is
  estimated *before* it runs and refused if one value would pass ``MAX_TEXT_CHARS``; what it
  builds is charged to a per-render character budget, so many medium values cannot add up;
- output is capped, and touching a forbidden attribute is an error at once instead of the
  stock sandbox's silent empty string;
- a render has a deadline in processor time (``CPU_SECONDS``) and can be stopped from another
  thread (``stop_renders_with``): steps bound how many lines run, not how long each takes, and
  one line may scan a string of sixteen million characters.

The deadline counts the rendering thread's own processor time, not the wall clock: a render
waiting for the GIL behind the app's other threads, or on a machine busy loading a model, is
not charged for it, while a template that computes is charged whatever else runs. Time and
the stop are looked at from the step counter, at most every ``CHECK_SECONDS`` of wall time
(the thread's clock is a system call, too slow for every line). What one step can cost is
bounded by the size limits: no value passes ``MAX_TEXT_CHARS``, and splitting a string into
pieces or a list is estimated before it runs, so one operation works through some sixteen
million characters at most, and the deadline is overshot by no more than one such operation.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import wraps
from types import FrameType
from typing import Any

from jinja2 import BaseLoader, Environment, Template, nodes
from jinja2.exceptions import SecurityError
from jinja2.ext import Extension
from jinja2.parser import Parser
from jinja2.sandbox import MAX_RANGE, ImmutableSandboxedEnvironment

from sessions.errors import LlamachatError
from sessions.templates import text_estimates as est

MAX_TEXT_CHARS = est.MAX_TEXT_CHARS
"""Largest single value, and largest total output, one render may produce (characters)."""
MAX_INT_BITS = 1 << 16
"""Largest integer arithmetic may build: huge integers are slow to multiply and print."""
BASE_STEPS = 200_000
"""Template lines one render may execute, before the allowance for a long conversation."""
BASE_BUILD_CHARS = 64 * 1024 * 1024
"""Characters one render may build in total, before the allowance for its input."""
CPU_SECONDS = 1.0
"""Processor time one render may take (real templates take milliseconds)."""
CHECK_SECONDS = 0.01
"""Wall time between two looks at the thread's processor time and at the stop."""

_TEMPLATE_FILENAME = "<template>"  # what Jinja2 names code compiled from a string


class RenderLimitError(LlamachatError):
    """A render went past one of the sandbox's bounds; the message says which, in plain words."""


class RenderStopped(LlamachatError):
    """A render was stopped from outside (``stop_renders_with``) before it finished."""


@dataclass
class RenderBudget:
    """What is left for the render running in this thread."""

    steps: int
    build_chars: int
    cpu_deadline: float = float("inf")
    """``time.thread_time()`` past which the render is refused."""
    cpu_seconds: float = CPU_SECONDS
    stop: threading.Event | None = None
    next_check: float = 0.0
    """``perf_counter()`` at which time and the stop are looked at next."""


_state = threading.local()
_rendering: set[int] = set()
"""Idents of the threads rendering now (``rendering_in``)."""


@contextmanager
def stop_renders_with(event: threading.Event | None) -> Iterator[None]:
    """Renders in this thread, while the block runs, stop as soon as ``event`` is set.

    The engine's jobs run under their stop flag this way, so that the key that stops a
    reply (and Ctrl+C on the command line) stops a template that runs long, wherever it
    is rendered: the test render when a model loads, or a reply's prompt.
    """
    previous = getattr(_state, "stop", None)
    _state.stop = event
    try:
        yield
    finally:
        _state.stop = previous


def stop_requested() -> bool:
    """Whether the stop ``stop_renders_with`` set for this thread is set: long work between
    renders (a whole chat's tokens) looks at it too."""
    event = getattr(_state, "stop", None)
    return event is not None and event.is_set()


def rendering_in(thread_ident: int | None) -> bool:
    """Whether the thread with this ident is rendering a template now."""
    return thread_ident in _rendering


def _charge(chars: int, what: str) -> None:
    if chars > MAX_TEXT_CHARS:
        raise RenderLimitError(
            f"{what} would build about {chars:,} characters (the limit is {MAX_TEXT_CHARS:,})"
        )
    budget: RenderBudget | None = getattr(_state, "budget", None)
    if budget is not None:
        budget.build_chars -= chars
        if budget.build_chars < 0:
            raise RenderLimitError("the template built far more text than its input calls for")


def _guard_call(func: Callable[..., Any], estimate: Callable[..., int] | None, what: str,
                args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Refuse a call whose result would be too large, run it, charge what it built."""
    if estimate is not None:
        try:
            expected = estimate(*args, **kwargs)
        except (TypeError, ValueError, AttributeError):
            expected = 0  # bad arguments: let the call itself fail with its own message
        _charge(expected, what)
    result = func(*args, **kwargs)
    _charge(est.text_size(result), what)
    return result


def _guarded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    estimate = est.FILTER_ESTIMATES.get(name)
    skip = 1 if hasattr(func, "jinja_pass_arg") else 0  # context / environment argument

    @wraps(func)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if name == "join" and len(args) > skip:  # an iterator's items must be counted first
            args = (*args[:skip], _bounded_items(args[skip]), *args[skip + 1:])
        if estimate is None:
            return _guard_call(func, None, f"the '{name}' filter", args, kwargs)
        return _guard_call(
            lambda *a, **k: func(*args[:skip], *a, **k), estimate, f"the '{name}' filter",
            args[skip:], kwargs,
        )

    return guarded


def _bounded_items(items: Any) -> Any:
    try:
        return est.bounded_items(items)
    except ValueError as error:
        raise RenderLimitError(f"it asked for {error}") from None


def _check_integer_growth(operator: str, left: Any, right: Any) -> None:
    if not (isinstance(left, int) and isinstance(right, int)):
        return
    if operator == "**" and right > 0 and abs(left) > 1:
        bits = left.bit_length() * right
    elif operator == "*":
        bits = left.bit_length() + right.bit_length()
    else:
        return
    if bits > MAX_INT_BITS:
        raise RenderLimitError(f"the '{operator}' operator would build an integer of {bits:,} bits")


class GenerationBlocks(Extension):
    """``{% generation %}...{% endgeneration %}``, which transformers added for training
    masks, renders its body as it is (as in llama.cpp, where the tag does nothing)."""

    tags = {"generation"}

    def parse(self, parser: Parser) -> list[nodes.Node]:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


class _NoTemplates(BaseLoader):
    """``import``, ``include`` and ``extends`` would read other files: refuse them plainly."""

    def get_source(self, environment: Environment, template: str) -> Any:
        raise SecurityError(f"reading another template ({template!r}) is forbidden")


def _bounded_range(*args: int) -> range:
    items = range(*args)
    if len(items) > MAX_RANGE:
        raise RenderLimitError(
            f"it asked for a range of {len(items):,} items (the limit is {MAX_RANGE:,})"
        )
    return items


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """``ImmutableSandboxedEnvironment`` plus the bounds described in the module docstring."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, **options: Any) -> None:
        super().__init__(
            trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols", GenerationBlocks],
            finalize=self._finalize, loader=_NoTemplates(), **options,
        )
        self.globals.pop("lipsum", None)  # builds as much text as it is asked for
        self.globals["range"] = _bounded_range
        for name, func in list(self.filters.items()):
            self.filters[name] = _guarded_filter(name, func)

    def add_filter(self, name: str, func: Callable[..., Any]) -> None:
        """Register a filter behind the same size guard as the built-in ones."""
        self.filters[name] = _guarded_filter(name, func)

    def compile_template(self, source: str) -> Template:
        """Compile ``source``; its string joins go through the size guard as well."""
        template = self.from_string(source)
        template.root_render_func.__globals__["str_join"] = self.concat
        return template

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        raise SecurityError(
            f"access to attribute {attribute!r} of a {type(obj).__name__!r} object is forbidden"
        )

    def concat(self, parts: Any) -> str:
        """Join output pieces (``~``, macro bodies, ``{% set %}`` blocks) within the limits."""
        parts = [p if isinstance(p, str) else str(p) for p in parts]
        _charge(sum(map(len, parts)), "joining text")
        return "".join(parts)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _check_integer_growth(operator, left, right)
        return _guard_call(self.binop_table[operator], est.binop_estimate(operator),
                           f"the '{operator}' operator", (left, right), {})

    def call(
        self, context: Any, obj: Any, /, *args: Any, **kwargs: Any
    ) -> Any:
        """Run a call from template code, refusing one that would build too much text."""
        method = getattr(obj, "__wrapped__", obj)  # str.format comes wrapped by the sandbox
        owner = getattr(method, "__self__", None)
        estimate = None
        if isinstance(owner, (str, bytes)):
            estimate = est.STR_METHOD_ESTIMATES.get(getattr(method, "__name__", ""))
            if estimate is not None:
                estimate = est.bind_owner(estimate, owner)
            if getattr(method, "__name__", "") == "join" and args:
                args = (_bounded_items(args[0]), *args[1:])
        name = getattr(method, "__name__", type(obj).__name__)
        return _guard_call(lambda *a, **k: super(BoundedSandbox, self).call(context, obj, *a, **k),
                           estimate, f"calling '{name}'", args, kwargs)

    def _finalize(self, value: Any) -> Any:
        if not isinstance(value, str):
            _charge(est.text_size(value), "printing a value")
        return value


_perf_counter = time.perf_counter  # read on every step: a module global, not an attribute


def _step() -> None:
    budget: RenderBudget = _state.budget
    budget.steps -= 1
    if budget.steps < 0:
        raise RenderLimitError("the template ran far too long (it may loop without end)")
    now = _perf_counter()
    if now >= budget.next_check:
        budget.next_check = now + CHECK_SECONDS
        _check_time(budget)


def _check_time(budget: RenderBudget) -> None:
    if budget.stop is not None and budget.stop.is_set():
        raise RenderStopped("the render was stopped")
    if time.thread_time() > budget.cpu_deadline:
        raise RenderLimitError(f"it ran for more than {_seconds(budget.cpu_seconds)} of processor time "
                               "(a chat template takes milliseconds)")


def _seconds(value: float) -> str:
    return "1 second" if value == 1 else f"{value:g} seconds"


def _trace_calls(frame: FrameType, event: str, arg: Any) -> Any:
    _step()  # every Python call made while rendering, template code or not
    return _trace_lines if frame.f_code.co_filename == _TEMPLATE_FILENAME else None


def _trace_lines(frame: FrameType, event: str, arg: Any) -> Any:
    if event == "line":
        _step()
    return _trace_lines


def render_bounded(template: Template, variables: Mapping[str, Any], *,
                   steps: int = BASE_STEPS, build_chars: int = BASE_BUILD_CHARS,
                   cpu_seconds: float | None = None, stop: threading.Event | None = None) -> str:
    """Render with a step budget, a build budget, a deadline and an output cap.

    ``cpu_seconds`` defaults to ``CPU_SECONDS`` (read at each call).
    ``stop`` (default: the one ``stop_renders_with`` set for this thread) ends the render
    with ``RenderStopped`` once set. Raises ``RenderLimitError`` when a bound is hit,
    ``SecurityError`` for forbidden access, and whatever else the template raises
    (``RecursionError`` included) otherwise.
    """
    previous_budget = getattr(_state, "budget", None)
    previous_trace = sys.gettrace()
    cpu_seconds = CPU_SECONDS if cpu_seconds is None else cpu_seconds
    _state.budget = RenderBudget(
        steps=steps, build_chars=build_chars, cpu_deadline=time.thread_time() + cpu_seconds,
        cpu_seconds=cpu_seconds, stop=stop if stop is not None else getattr(_state, "stop", None),
    )
    out: list[str] = []
    size = 0
    ident = threading.get_ident()
    nested = ident in _rendering
    _rendering.add(ident)
    sys.settrace(_trace_calls)
    try:
        chunks: Iterator[str] = template.generate(**variables)
        for chunk in chunks:
            size += len(chunk)
            if size > MAX_TEXT_CHARS:
                raise RenderLimitError(
                    f"the template produced more than {MAX_TEXT_CHARS:,} characters"
                )
            out.append(chunk)
    finally:
        sys.settrace(previous_trace)
        _state.budget = previous_budget
        if not nested:
            _rendering.discard(ident)
    return "".join(out)
