"""Running a model across machines with llama.cpp's RPC backend.

Another machine runs ``llamachat rpc-server`` (``server``), which exposes its devices
over TCP; this one adds each server to ggml's device registry before a model loads
(``backend``), and llama.cpp then spreads the offloaded layers (``-ngl``) over them.
``probe`` talks the protocol's first few messages from Python, so that an unreachable
or busy server is a sentence naming it instead of a hang or an abort inside llama.cpp.
``endpoints`` parses ``HOST:PORT`` lists without importing anything heavy. Which devices a
loaded model's layers went to is the bindings' to say (``sessions.llama.placement``).
May import ``llama`` (ggml's registry); never branching, the engine or the controller.
"""
