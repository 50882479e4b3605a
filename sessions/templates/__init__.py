"""Chat templates: which one a model gets, rendered in a bounded sandbox, and each message's tokens.

Tokens are frozen when a message is added (``message_tokens``): a branch maps to what its cache holds.
May import jinja2 and the core's small modules; never llama.cpp's bindings, branching or the engine.
"""
