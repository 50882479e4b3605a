"""What can go wrong with RPC servers, in plain words.

Both are ``ControllerError``s: the app shows their message as it is, ``ask`` prints it
as its one-line error, and neither needs to know about RPC.
"""

from __future__ import annotations

from sessions.errors import ControllerError

REBUILD = ('CMAKE_ARGS="-DGGML_RPC=on" pip install --no-cache-dir --force-reinstall --no-deps '
           "llama-cpp-python==0.3.36")
"""The command that rebuilds llama-cpp-python with the RPC backend (pip's wheel cache does
not key on CMAKE_ARGS, hence --no-cache-dir)."""


class RpcError(ControllerError):
    """An RPC server cannot be used (unreachable, busy, wrong version) or RPC is not built in."""


class EngineLost(ControllerError):
    """The process running the model ended (an RPC server died or stopped answering).

    What was committed stays; the reply being written is dropped. The next request starts
    the engine again (and says so if a server is still away).
    """
