"""The core as its front ends (the app, the command line, the HTTP server) see it.

``runtime`` opens everything a chat runs on. May import any package of the core but the
front ends.
"""
