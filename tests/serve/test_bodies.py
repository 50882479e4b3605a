"""Request bodies: what is used, what is accepted because it changes nothing, what is refused."""

from __future__ import annotations

import pytest

from sessions.serve.bodies import chat_request, completion_request
from sessions.serve.errors import ApiError
from sessions.serve.stop_words import StopWatch

HELLO = [{"role": "user", "content": "Hello"}]


def refused(body, words: str, param: str | None = None) -> ApiError:
    with pytest.raises(ApiError) as caught:
        chat_request(body)
    assert caught.value.status == 400
    assert words in str(caught.value)
    if param is not None:
        assert caught.value.param == param
    return caught.value


def test_a_chat_body_gives_its_messages_sampling_and_choices():
    request = chat_request({"model": "m", "messages": [{"role": "developer", "content": "Be brief."}, *HELLO],
                            "temperature": 0, "top_k": 5, "top_p": 0.5, "min_p": 0.1, "seed": 7,
                            "repetition_penalty": 1.1, "max_completion_tokens": 12, "n": 3, "stop": "END",
                            "stream": True, "stream_options": {"include_usage": True}, "user": "someone",
                            "frequency_penalty": 0, "logit_bias": {}, "tools": []})
    assert request.messages == [("system", "Be brief."), ("user", "Hello")]
    assert request.sampling.values == {"temperature": 0, "top_k": 5, "top_p": 0.5, "min_p": 0.1, "seed": 7,
                                       "repeat_penalty": 1.1}
    assert request.sampling.max_tokens == 12
    assert (request.n, request.stop, request.stream, request.include_usage) == (3, ["END"], True, True)
    assert not request.continue_last


def test_text_parts_are_joined_and_a_trailing_reply_is_gone_on_from():
    request = chat_request({"messages": [{"role": "user", "content": [{"type": "text", "text": "Hel"},
                                                                      {"type": "text", "text": "lo"}]},
                                         {"role": "assistant", "content": "Hi, I"}]})
    assert request.messages == [("user", "Hello"), ("assistant", "Hi, I")]
    assert request.continue_last
    empty = chat_request({"messages": [*HELLO, {"role": "assistant", "content": ""}]})
    assert empty.messages == [("user", "Hello")] and not empty.continue_last


@pytest.mark.parametrize(("body", "words", "param"), [
    ({"messages": HELLO, "max_tokenz": 5}, "unknown field", "max_tokenz"),
    ({"messages": HELLO, "logit_bias": {"5": 100}}, "not supported", "logit_bias"),
    ({"messages": HELLO, "tools": [{"type": "function"}]}, "not supported", "tools"),
    ({"messages": HELLO, "presence_penalty": 0.5}, "not supported", "presence_penalty"),
    ({"messages": HELLO, "temperature": "hot"}, "must be a number", "temperature"),
    ({"messages": HELLO, "temperature": -1}, "must be from", "temperature"),
    ({"messages": HELLO, "seed": 1.5}, "whole number", "seed"),
    ({"messages": HELLO, "n": 9}, "from 1 to 8", "n"),
    ({"messages": HELLO, "n": True}, "from 1 to 8", "n"),
    ({"messages": HELLO, "max_tokens": 0}, "must be from", "max_tokens"),
    ({"messages": HELLO, "stop": ["a"] * 17}, "at most 16", "stop"),
    ({"messages": HELLO, "stream": "yes"}, "true or false", "stream"),
    ({"messages": []}, "non-empty array", "messages"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "is not a role", "messages[0].role"),
    ({"messages": [{"role": "user", "content": "x", "tool_calls": []}]}, "tool calls", "messages[0]"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "only text parts",
     "messages[0].content[0]"),
    ({"messages": [{"role": "user", "content": "a\x00b"}]}, "NUL", "messages[0].content"),
    ({"messages": [*HELLO, {"role": "assistant", "content": "a"}], "n": 2}, "once per request", "n"),
    ({"messages": [*HELLO, {"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}]},
     "two assistant messages", "messages"),
    ({"messages": HELLO, "continue_final_message": True}, "must be the assistant's", "continue_final_message"),
    ([1, 2], "JSON object", None),
])
def test_a_body_the_server_cannot_follow_is_refused_naming_the_field(body, words, param):
    refused(body, words, param)


def test_a_completion_prompt_is_text_or_token_ids():
    assert completion_request({"prompt": "Once"}).prompt == "Once"
    assert completion_request({"prompt": ["Once"]}).prompt == "Once"
    assert completion_request({"prompt": [1, 2, 3], "n_predict": -1}).prompt == [1, 2, 3]
    for bad in ("", [], [-1], ["a", "b"], [1.5], None):
        with pytest.raises(ApiError, match="prompt"):
            completion_request({"prompt": bad})
    with pytest.raises(ApiError, match="unknown field"):
        completion_request({"prompt": "x", "messages": HELLO})


def test_stop_strings_are_found_across_pieces_and_never_sent():
    watch = StopWatch(["</end>", "STOP"])
    sent = [watch.push(piece) for piece in ("Hello </", "en", "d> more")]
    assert sent == ["Hello ", "", ""] and watch.stopped and watch.finish() == ""
    watch = StopWatch(["</end>"])
    assert [watch.push(piece) for piece in ("a<", "/b", "c")] == ["a", "</b", "c"]
    assert not watch.stopped and watch.finish() == ""
    watch = StopWatch(["xyz"])
    assert watch.push("abx") == "ab" and watch.finish() == "x"
