"""The bindings to llama.cpp: models, contexts, decoding, sampling, devices, a saved state's layout.

``native`` loads llama.cpp on first use, so importing any of these modules stays cheap.
May import ``discovery`` and the core's small modules; never branching, templates or the engine.
"""
