"""Frozen message pieces on the 13 real chat templates, and on a real tokenizer."""

from __future__ import annotations

from datetime import datetime

import pytest

from sessions.templates import chat_template, message_tokens
from sessions.templates.chat_template import ChatMessage, ChatTemplate, TemplateError
from sessions.templates.message_tokens import freeze_message_tokens, message_text_piece
from tests.conftest import SHARED

TEMPLATES = sorted(p.stem for p in (SHARED / "templates").glob("*.jinja"))

SPECIAL_TOKENS = {  # (bos, eos) as each model's tokenizer spells them
    "HuggingFaceTB-SmolLM3-3B": ("", "<|im_end|>"),
    "LFM2.5-Instruct": ("<|startoftext|>", "<|im_end|>"),
    "Mistral-Small-3.2-24B-Instruct-2506": ("<s>", "</s>"),
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": ("<s>", "<|im_end|>"),
    "Qwen-Qwen3-0.6B": ("", "<|im_end|>"),
    "Qwen3.5-4B": ("", "<|im_end|>"),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "google-gemma-2-2b-it": ("<bos>", "<eos>"),
    "google-gemma-4-31B-it": ("<bos>", "<eos>"),
    "ibm-granite-granite-4.0": ("", "<|end_of_text|>"),
    "meta-llama-Llama-3.2-3B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "microsoft-Phi-3.5-mini-instruct": ("<s>", "<|endoftext|>"),
    "openai-gpt-oss-120b": ("<|startoftext|>", "<|return|>"),
}

# Where the pieces differ from a full render, they differ only right before a reply's text:
# (what the full render puts there, what the pieces put there). A generated reply follows the
# generation prompt in the cache, while the full render writes the template's history form;
# an imported reply's piece is the template's form of a *final* reply, minus what the
# generation prompt already holds (or the bare text when the two disagree).
GENERATED_OPENINGS = {
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": ("<think></think>", "<think>\n"),
    "Qwen3.5-4B": ("", "<think>\n"),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": ("", "<think>\n"),
    "openai-gpt-oss-120b": ("<|channel|>final<|message|>", ""),  # the model writes the channel
}
IMPORTED_OPENINGS = {
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": ("<think></think>", "<think>\n"),
    "Qwen-Qwen3-0.6B": ("", "<think>\n\n</think>\n\n"),  # kept from when the reply was last
    "Qwen3.5-4B": ("", "<think>\n\n</think>\n\n"),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": ("", "<think>\n"),
}

DAY_ONE = datetime(2025, 3, 4, 9, 30)
DAY_TWO = datetime(2025, 3, 5, 9, 30)


def fake_tokenize(text: str, add_bos: bool) -> list[int]:
    return ([-1] if add_bos else []) + list(text.encode())


def load(name: str) -> ChatTemplate:
    bos, eos = SPECIAL_TOKENS[name]
    template = ChatTemplate.load((SHARED / "templates" / f"{name}.jinja").read_text(),
                                 bos_token=bos, eos_token=eos)
    assert not template.is_fallback, template.fallback_reason
    return template


def conversation(turns: int, system: bool = True) -> list[ChatMessage]:
    messages = [ChatMessage("system", "You answer in one short sentence.")] if system else []
    for turn in range(turns):
        messages.append(ChatMessage("user", f"Question number {turn}: what is {turn} plus {turn}?"))
        messages.append(ChatMessage("assistant", f"It is {turn + turn}, answer {turn}."))
    return messages[:-1]  # ends with a user message, waiting for a reply


def pieces_of(template: ChatTemplate, messages: list[ChatMessage], generated: bool) -> list[str]:
    """Each message's piece, computed as the conversation grows."""
    pieces = []
    for k, message in enumerate(messages):
        if generated and message.role == "assistant":
            pieces.append(message.content)  # sampled tokens: nothing to render
        else:
            pieces.append(message_text_piece(template, messages[:k], message))
    return pieces


def expected_full_render(template, name, messages, generated) -> str:
    """The full render with each reply's opening swapped for what the pieces put there."""
    text = template.render(messages, add_generation_prompt=True)
    table = GENERATED_OPENINGS if generated else IMPORTED_OPENINGS
    in_render, in_pieces = table.get(name, ("", ""))
    for reply in (m.content for m in messages if m.role == "assistant"):
        assert text.count(in_render + reply) == 1
        text = text.replace(in_render + reply, in_pieces + reply)
    return text


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch):
    monkeypatch.setattr(chat_template, "current_time", lambda: DAY_ONE)


@pytest.mark.parametrize("generated", [True, False], ids=["generated", "imported"])
@pytest.mark.parametrize("system", [True, False], ids=["system", "no-system"])
@pytest.mark.parametrize("name", TEMPLATES)
def test_pieces_rebuild_the_full_render(name, system, generated):
    template = load(name)
    messages = conversation(2, system)
    pieces = pieces_of(template, messages, generated)
    assert "".join(pieces) == expected_full_render(template, name, messages, generated)
    # A reply's closing (end of turn) is carried by the next message, never by the reply.
    reply = messages.index(next(m for m in messages if m.role == "assistant"))
    assert pieces[reply].endswith(messages[reply].content)


@pytest.mark.parametrize("name", TEMPLATES)
def test_long_conversation_pieces_are_stable(name, monkeypatch):
    template = load(name)
    messages = conversation(7)
    pieces = pieces_of(template, messages, generated=False)
    assert "".join(pieces) == expected_full_render(template, name, messages, generated=False)
    # Adding messages never changes an earlier piece, and rendering only the last few
    # messages gives the same pieces as rendering the whole history.
    assert pieces_of(template, messages[:5], generated=False) == pieces[:5]
    monkeypatch.setattr(message_tokens, "HISTORY_WINDOW", 10_000)
    assert pieces_of(template, messages, generated=False) == pieces


@pytest.mark.parametrize("name", ["Mistral-Small-3.2-24B-Instruct-2506",
                                  "meta-llama-Llama-3.2-3B-Instruct", "openai-gpt-oss-120b"])
def test_todays_date_stays_in_the_first_piece(name, monkeypatch):
    template = load(name)
    messages = conversation(3, system=False)
    frozen = pieces_of(template, messages[:4], generated=False)
    day_one_render = template.render(messages, add_generation_prompt=True)
    monkeypatch.setattr(chat_template, "current_time", lambda: DAY_TWO)
    fifth = message_text_piece(template, messages[:4], messages[4])
    dates = {DAY_ONE.strftime(f) for f in ("%Y-%m-%d", "%d %b %Y")}
    assert any(date in frozen[0] for date in dates)
    assert not any(DAY_TWO.strftime(f) in fifth for f in ("%Y-%m-%d", "%d %b %Y", "%d %b"))
    assert "".join([*frozen, fifth]) == day_one_render
    # Re-rendering the first message today would have changed it: that is why it is frozen.
    assert message_text_piece(template, [], messages[0]) != frozen[0]


@pytest.mark.parametrize(("name", "template_writes_bos"), [
    ("meta-llama-Llama-3.2-3B-Instruct", True), ("Qwen-Qwen3-0.6B", False)])
def test_bos_is_added_once_and_only_when_the_template_has_not(name, template_writes_bos):
    template = load(name)
    messages = conversation(2)
    calls: list[tuple[str, bool]] = []

    def tokenize(text: str, add_bos: bool) -> list[int]:
        calls.append((text, add_bos))
        return fake_tokenize(text, add_bos)

    tokens = [freeze_message_tokens(template, tokenize, messages[:k], m)
              for k, m in enumerate(messages)]
    assert calls[0][1] is not template_writes_bos
    assert (template.bos_token != "" and calls[0][0].startswith(template.bos_token)) \
        is template_writes_bos
    assert [add_bos for _, add_bos in calls[1:]] == [False] * (len(messages) - 1)
    assert tokens[1] == list(calls[1][0].encode())


def test_piece_after_a_reply_the_template_leaves_out_is_an_error():
    template = ChatTemplate.load(
        "{% for m in messages %}{% if m.role != 'assistant' %}"
        "{{ '<|' + m.role + '|>' + m.content + '<|end|>' }}{% endif %}{% endfor %}"
    )
    assert not template.is_fallback
    history = [ChatMessage("user", "Hi"), ChatMessage("assistant", "Hello")]
    with pytest.raises(TemplateError, match="leaves out the text of earlier messages"):
        message_text_piece(template, history, ChatMessage("user", "Again"))


@pytest.fixture(scope="module")
def phi3_vocab():
    L = pytest.importorskip("llama_cpp")
    L.llama_backend_init()
    params = L.llama_model_default_params()
    params.vocab_only = True
    model = L.llama_model_load_from_file(str(SHARED / "models" / "ggml-vocab-phi-3.gguf").encode(),
                                         params)
    assert model, "could not load the Phi-3 vocabulary"
    yield L, model, L.llama_model_get_vocab(model)
    L.llama_model_free(model)


@pytest.mark.engine
def test_real_phi3_template_and_tokenizer(phi3_vocab):
    L, model, vocab = phi3_vocab

    def tokenize(text: str, add_bos: bool) -> list[int]:
        data = text.encode()
        buffer = (L.llama_token * (len(data) + 8))()
        count = L.llama_tokenize(vocab, data, len(data), buffer, len(buffer), add_bos, True)
        assert count >= 0
        return list(buffer[:count])

    source = L.llama_model_chat_template(model, None).decode()
    template = ChatTemplate.load(source, bos_token="<s>", eos_token="<|endoftext|>")
    assert not template.is_fallback and template.merges_system  # it has no system role
    messages = conversation(2)
    tokens = [freeze_message_tokens(template, tokenize, messages[:k], m)
              for k, m in enumerate(messages)]
    text = "".join(message_text_piece(template, messages[:k], m) for k, m in enumerate(messages))
    assert text == template.render(messages, add_generation_prompt=True)
    flat = [t for piece in tokens for t in piece]
    assert flat.count(L.llama_vocab_bos(vocab)) == 1 and flat[0] == L.llama_vocab_bos(vocab)
    for control in ("<|user|>", "<|assistant|>", "<|end|>"):
        ids = tokenize(control, False)
        assert len(ids) == 1, f"{control} is not a single token"
        assert flat.count(ids[0]) == text.count(control) > 0
