"""Models without a chat template: the fallback their vocabulary points to, on real llama.cpp.

Made models with Gemma-style, Llama-3-style, ChatML and no chat markers (and no template),
plus the real Phi-3 tokenizer: the chosen template's markers are single control tokens,
a chat freezes per-message tokens that add up to the tokenized full render, a second turn
evaluates only its new tokens, and a base-model vocabulary is called one.
"""

from __future__ import annotations

import pytest

from sessions.api.chat import EngineSettings, SessionController
from sessions.controller.branch_tokens import branch_tokens
from sessions.engine.chat_engine import LlamaChatEngine
from sessions.events import NoticeRaised
from sessions.llama.context import ContextParams
from sessions.llama.vocab_markers import special_token_texts
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore
from sessions.synth import make_model
from sessions.templates.chat_template import ChatMessage, ChatTemplate
from sessions.templates.choice import BASE_MODEL, choose_template
from sessions.templates.families import ALL_MARKERS, BY_NAME, detect_family
from sessions.templates.message_tokens import freeze_message_tokens
from tests.conftest import SHARED

pytestmark = pytest.mark.engine

STYLES = {  # marker style of the made model: (make_model options, the template expected)
    "gemma": ({"markers": "gemma"}, "gemma"),
    "llama3": ({"markers": "llama3"}, "llama3"),
    "chatml": ({"chat_template": ""}, "chatml"),
    "none": ({"markers": "none"}, "plain"),
}
CHAT = [ChatMessage("system", "You answer briefly."), ChatMessage("user", "What is the sea?"),
        ChatMessage("assistant", "A large body of salt water."), ChatMessage("user", "And a lake?"),
        ChatMessage("assistant", "Fresh water, with land all round."), ChatMessage("user", "Thanks!")]


@pytest.fixture(scope="module")
def engines():
    made = {style: LlamaChatEngine(make_model("llama", "tiny", **options), ContextParams(n_ctx=512, n_batch=64,
                                                                                          n_threads=1))
            for style, (options, _) in STYLES.items()}
    yield made
    for engine in made.values():
        engine.close()


@pytest.mark.parametrize("style", sorted(STYLES))
def test_the_fallback_is_the_one_the_vocabulary_speaks(engines, style):
    engine = engines[style]
    assert engine.info.chat_template is None
    template = engine.template
    assert template.name == STYLES[style][1] and template.is_fallback
    assert template.fallback_reason.startswith("the model has no chat template")
    if style == "none":
        assert BASE_MODEL in template.fallback_reason
        assert engine.model.special_tokens(ALL_MARKERS) == frozenset()
        return
    family = BY_NAME[template.name]
    assert f"using the {family.title} template instead" in template.fallback_reason
    for marker in family.markers:
        assert len(engine.tokenize(marker, False)) == 1, f"{marker} is not one token"
    special = engine.model.special_tokens(ALL_MARKERS)
    assert special >= set(family.markers) and detect_family(special) == family


@pytest.mark.parametrize("style", ["gemma", "llama3"])
def test_chatml_markers_would_have_been_plain_text_there(engines, style):
    """Why ChatML was the wrong fallback: these tokenizers split its markers into pieces."""
    for marker in BY_NAME["chatml"].markers:
        assert len(engines[style].tokenize(marker, False)) > 3


@pytest.mark.parametrize("style", sorted(STYLES))
def test_frozen_pieces_add_up_to_the_tokenized_render(engines, style):
    engine = engines[style]
    template = engine.template
    frozen = [freeze_message_tokens(template, engine.tokenize, CHAT[:k], m) for k, m in enumerate(CHAT)]
    flat = [token for piece in frozen for token in piece]
    assert flat == engine.tokenize(template.render(CHAT, add_generation_prompt=True), True)
    # Append-only: a message added later never changes the tokens of an earlier one.
    for end in range(1, len(CHAT)):
        assert [freeze_message_tokens(template, engine.tokenize, CHAT[:k], m)
                for k, m in enumerate(CHAT[:end])] == frozen[:end]
    if style != "none":
        text = template.render(CHAT, add_generation_prompt=True)
        for marker in BY_NAME[template.name].markers:
            [marker_id] = engine.tokenize(marker, False)
            assert flat.count(marker_id) == text.count(marker) > 0


@pytest.mark.parametrize("style", ["gemma", "none"])
def test_a_chat_on_the_fallback_goes_on_and_evaluates_only_what_is_new(style):
    notices: list[str] = []
    store = SessionStore.open()
    from sessions.engine.factory import llama_engine_factory

    controller = SessionController(
        store, engine_factory=llama_engine_factory(None), settings=EngineSettings(n_ctx=512, n_batch=64, threads=1),
        sampling=SamplingSettings(temperature=0.0, max_tokens=8),
        listener=lambda e: notices.append(e.text) if isinstance(e, NoticeRaised) else None)
    try:
        controller.load_model(make_model("llama", "tiny", **STYLES[style][0]))
        assert len(notices) == 1 and notices[0] == controller.engine.template.fallback_reason
        controller.new_session(system_prompt="Be brief.")
        controller.send("Hello there")
        first = controller.generate_reply().stats
        controller.send("Tell me more.")
        second = controller.generate_reply().stats
        assert first.tokens_generated > 0 and second.tokens_generated > 0
        path = list(controller.snapshot().path[:-1])
        tokens, _, _ = branch_tokens(store, controller.engine, path)
        # The first turn's tokens, as the model saw them, are still the branch's start:
        # only the new message is evaluated.
        kept = first.tokens_evaluated + first.tokens_generated
        assert second.tokens_evaluated == len(tokens) - kept > 0
    finally:
        if controller.engine is not None:
            controller.engine.close()
        store.close()


@pytest.fixture(scope="module")
def phi3_vocab():
    from sessions.llama.native import lib

    L = lib()
    params = L.llama_model_default_params()
    params.vocab_only = True
    model = L.llama_model_load_from_file(str(SHARED / "models" / "ggml-vocab-phi-3.gguf").encode(), params)
    assert model, "could not load the Phi-3 vocabulary"
    yield L, model, L.llama_model_get_vocab(model)
    L.llama_model_free(model)


def test_the_real_phi3_vocabulary_points_to_phi3(phi3_vocab):
    L, model, vocab = phi3_vocab

    def tokenize(text: str, add_bos: bool) -> list[int]:
        data = text.encode()
        buffer = (L.llama_token * (len(data) + 8))()
        count = L.llama_tokenize(vocab, data, len(data), buffer, len(buffer), add_bos, True)
        assert count >= 0
        return list(buffer[:count])

    special = special_token_texts(L, vocab, ALL_MARKERS)
    assert special == {"<|user|>", "<|assistant|>", "<|end|>"}
    assert detect_family(special).name == "phi3"
    own = L.llama_model_chat_template(model, None).decode()
    assert choose_template(own, special, bos_token="<s>").name == "model"
    fallback = choose_template(None, special, bos_token="<s>")
    assert fallback.name == "phi3"
    assert fallback.fallback_reason == ("the model has no chat template; using the Phi-3 template instead "
                                        "(its vocabulary has <|user|>, <|assistant|>, <|end|>)")
    messages = CHAT[1:]  # Phi-3's own template has no system role
    frozen = [freeze_message_tokens(fallback, tokenize, messages[:k], m) for k, m in enumerate(messages)]
    flat = [token for piece in frozen for token in piece]
    assert flat == tokenize(fallback.render(messages, add_generation_prompt=True), True)
    assert flat[0] == L.llama_vocab_bos(vocab) and flat.count(flat[0]) == 1
    # The built-in writes the turns as the model's own template does.
    real = ChatTemplate.compile(own, bos_token="<s>", eos_token="<|endoftext|>")
    text = real.render(messages, add_generation_prompt=True)
    assert text.startswith("<s>")  # it writes the BOS itself
    assert tokenize(text, False) == flat
