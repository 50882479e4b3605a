"""The part of the core that turns a conversation into the exact tokens a model sees.

A GGUF brings its own chat template and its own memory layout; the modules here keep both
honest: templates are rendered in a bounded sandbox, and each message's tokens are frozen
when the message is added so that a branch always maps to the tokens its cache holds.
"""
