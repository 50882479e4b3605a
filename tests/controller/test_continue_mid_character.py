"""A reply cut between the bytes of one character, then continued, is stored as its tokens read.

The fake engine here writes byte by byte (one token per byte), so a length limit can end a
reply inside a 4-byte character: the cut reply ends in a replacement character, and the
continuation starts with the character's last bytes. The stored text of the longer version
must be its tokens read as one run, the character whole, with no replacement character.
"""

from __future__ import annotations

from sessions.api.chat import SessionController
from sessions.branching.branch_engine import GenerateResult
from sessions.llama.detokenizer import Detokenizer
from sessions.sampling import SamplingSettings
from sessions.stop_reason import StopReason
from tests.tui.fake_engine import FakeEngine, FakeEngineFactory, FakeScript

ANSWER = "ab \U00013003 \U00010330 end"
"""Two 4-byte characters (an Egyptian hieroglyph, a Gothic letter) among ASCII."""


class BytewiseEngine(FakeEngine):
    """Writes ``ANSWER`` one byte per token, going on from the bytes already written."""

    def generate(self, logits, settings, *, max_tokens, on_text=None, should_stop=lambda: False) -> GenerateResult:
        answer = ANSWER.encode("utf-8")
        done = self.written
        tokens = list(answer[done:done + max_tokens])
        detok = Detokenizer(lambda token: bytes([token]))
        for token in tokens:
            if (piece := detok.push(token)) and on_text:
                on_text(piece)
        detok.finish()
        self.written = done + len(tokens)
        self.live.extend(tokens)
        reason = StopReason.EOG if self.written >= len(answer) else StopReason.LENGTH
        return GenerateResult(tokens, detok.text, reason, 0.0, 0.0)

    written = 0


class BytewiseFactory(FakeEngineFactory):
    def __call__(self, path, settings, on_progress) -> FakeEngine:
        engine = BytewiseEngine(path, self.script, n_ctx=self.script.n_ctx)
        self.engines.append(engine)
        return engine


def test_a_reply_cut_inside_a_character_and_continued_stores_the_character_whole(store, tmp_path):
    controller = SessionController(store, engine_factory=BytewiseFactory(FakeScript()),
                                   sampling=SamplingSettings(temperature=0.0))
    controller.load_model(tmp_path / "model.gguf")
    controller.new_session()
    controller.send("Write two rare letters.")
    cut = controller.generate_reply(sampling=SamplingSettings(temperature=0.0, max_tokens=5))  # "ab " + 2 of 4
    assert cut.stats.stop_reason == StopReason.LENGTH and cut.text == "ab \ufffd"
    middle = controller.continue_reply(max_tokens=5)  # the hieroglyph's last 2 bytes, " ", 2 of the Gothic's
    whole = controller.continue_reply(max_tokens=64)
    fingerprint = controller.engine.info.fingerprint
    for reply in (cut, middle, whole):
        tokens = store.get_tokens(reply.id, fingerprint)
        assert reply.text == bytes(tokens).decode("utf-8", "replace")
    assert middle.text == "ab \U00013003 \ufffd"
    assert whole.text == ANSWER and whole.stats.stop_reason == StopReason.EOG
    controller.close()
