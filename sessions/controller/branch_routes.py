"""What making a branch live would take, and where its states are kept: the open chat's
routes, priced, for the switch estimates, the tree's marks and warm-ahead.

``SessionController.routes``. Each question goes to the engine, which may be in another
process and answers one call at a time, so none of them waits behind a job that holds
it, except ``plan_for``, which a job asks for itself; run them in a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from sessions.controller import chat_reads
from sessions.controller.job_control import JobControl
from sessions.controller.open_chat import OpenChat
from sessions.controller.switch_estimate import priced, size_prior, stored_rates
from sessions.engine.protocol import ChatEngine
from sessions.store import SessionStore

if TYPE_CHECKING:
    from sessions.controller.branch_tokens import BranchTokens
    from sessions.engine.reports import RoutePlan, Tier, WarmedAhead


class BranchRoutes:
    """Plans and prices of the open chat's branches, their checkpoint tiers, warm-ahead."""

    def __init__(self, chat: OpenChat, jobs: JobControl, store: SessionStore) -> None:
        self._chat = chat
        self._jobs = jobs
        self._store = store

    def saved_message_ids(self) -> set[int] | None:
        """Messages whose state at their end is checkpointed (RAM or disk) for this model;
        None while a job holds the engine (see ``checkpoint_tiers``)."""
        tiers = self.checkpoint_tiers()
        return None if tiers is None else {message_id for message_id, tier in tiers.items() if tier is not None}

    def checkpoint_tiers(self, message_ids: Collection[int] | None = None) -> dict[int, Tier | None] | None:
        """Where the state at the end of each of ``message_ids`` (every message of the open
        chat when None) is checkpointed for the loaded model: ``"ram"``, ``"disk"``, or
        None (going there decodes it). Ids not in the open chat are left out.

        It reads the chat's tokens from the store and hashes the branches that lead to
        these messages; the checkpoint store answers from its index, without reading a
        file. None while a job holds the engine: the question goes to the engine, which may
        be in another process and answer only once the job ends; the caller keeps the marks
        it has. Call it from a worker thread.
        """
        with self._jobs.free() as free:
            if not free:
                return None
            engine = self._chat.engine
            with self._chat.lock:
                conversation = self._chat.conversation
                if conversation is None:
                    return {}
                session_id, tree = conversation.session_id, conversation.tree.copy()
            if engine is None:
                return dict.fromkeys(tree.ids() if message_ids is None else [i for i in message_ids if i in tree])
            return chat_reads.checkpoint_tiers(session_id, tree, self._store, engine, message_ids)

    def plan_for(self, leaf_id: int | None = None) -> RoutePlan:
        """What making the branch that ends at ``leaf_id`` live would cost (no work done);
        waits for a job that holds the engine."""
        with self._jobs.held():
            engine = self._chat.loaded()
            branch = self._chat.branch(engine, leaf_id)
            return self._priced(engine, engine.plan(branch.tokens, branch.ends, need_logits=False,
                                                    stepped=branch.stepped), branch)

    def plan_choice(self, message_id: int) -> RoutePlan | None:
        """What choosing ``message_id`` (its branch last seen, as ``select``) would cost.

        None while a job holds the engine: a plan reads the live state llama.cpp is
        changing then. Run it in a worker thread: a branch whose tokens are not known yet
        (an imported chat) is tokenized here first.
        """
        with self._jobs.free() as free:
            if not free:
                return None
            engine = self._chat.loaded()
            with self._chat.lock:
                path = self._chat.path(self._chat.conv().tree.resume_leaf(message_id).id)
            branch = self._chat.tokens(engine, path)
            return self._priced(engine, engine.plan(branch.tokens, branch.ends, need_logits=False,
                                                    stepped=branch.stepped), branch)

    def warm_ahead(self, message_id: int, should_stop: Callable[[], bool]) -> WarmedAhead | None:
        """Read what choosing ``message_id`` (its branch last seen, as ``select``) would
        restore from disk into RAM, root first, until ``should_stop`` says so; what was read.

        The live context stays as it is (``ChatEngine.warm_ahead``). None while a job holds
        the engine, or when stopped before it began: the plan reads the live state. The
        engine is let go once the route is planned, the reads touching only the checkpoint
        store, except for an engine in another process, which takes one call at a time:
        there a gesture that needs the engine waits for the read under way (stop it
        first). Run it in a worker thread.
        """
        with self._jobs.free_until() as release:
            if release is None or should_stop():
                return None
            engine = self._chat.loaded()
            with self._chat.lock:
                path = self._chat.path(self._chat.conv().tree.resume_leaf(message_id).id)
            branch = self._chat.tokens(engine, path)
            if len(branch.tokens) > engine.n_ctx:
                return None  # no switch goes there: it is trimmed first
            return engine.warm_ahead(branch.tokens, branch.ends, should_stop, planned=release)

    def _priced(self, engine: ChatEngine, plan: RoutePlan, branch: BranchTokens) -> RoutePlan:
        """``plan`` priced part by part, at the engine's measured speeds, or before it has
        decoded anything, at those the open chat's stored replies show (``switch_estimate``)."""
        rates = plan.rates
        if not rates.measured:
            with self._chat.lock:
                stats = [m.stats for m in self._chat.conv().tree.messages() if m.stats is not None]
            rates = size_prior(stored_rates(stats, engine.info.fingerprint, rates), engine.info.n_params)
        return priced(plan, branch, rates)
