"""The session controller: ``SessionController`` and the parts it holds, by subject.

``open_chat`` holds the open chat, the loaded model and the tree lock; ``job_control``
the engine lock and the stop protocol; ``reply`` writes a reply (``continuation`` and
``versions`` keep their rules); ``model_loading`` swaps models; ``conversation`` is the
chat's tree in memory over the store, ``branch_tokens`` a branch's exact tokens;
``snapshot`` is what the front ends read. The front ends reach it through
``sessions.api.chat``, never here. May import any package of the core below it, and the
engine only through its protocol and reports (an import contract says so).
"""
