"""``llamachat serve``: the branch engine behind an OpenAI-compatible HTTP endpoint.

Each request a client sends (the whole conversation, every time) is mapped onto the
token tree of a served chat through the controller, as the app and ``ask`` use it
(``SessionController.place_request``): what is stored is reused, only the new tokens
are evaluated, and the reply is stored as a branch. ``app`` has the endpoints
(Starlette, streamed with sse-starlette), ``engine_thread`` the one thread that drives
the model and the bounded queue before it, ``writing`` a request's work on it,
``bodies`` and ``responses`` the JSON in and out, ``server`` the process (uvicorn).

Sits beside the command line, over the runtime and the controller: imports those and the
core's leaves, never the engine, the store or the UI.
"""

from sessions.serve.server import ServeOptions, serve

__all__ = ["ServeOptions", "serve"]
