"""What the server refuses, in OpenAI's error shape with llama-server's types and codes.

Clients show ``error.message`` to their users and branch on the status code, so every
refusal is one of these: a sentence that says what to change, the HTTP status, and the
``type`` llama-server gives the same status (``invalid_request_error``,
``authentication_error``, ``not_found_error``, ``unavailable_error``...).
"""

from __future__ import annotations

from typing import Any

from sessions.errors import LlamachatError

TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "invalid_request_error",
    408: "timeout_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    500: "server_error",
    503: "unavailable_error",
}


class ApiError(LlamachatError):
    """A request the server refuses or cannot answer; ``str()`` is the sentence a client shows."""

    def __init__(self, message: str, status: int = 400, *, param: str | None = None, code: str | None = None,
                 error_type: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param
        """The request field at fault, as OpenAI names it (None: the request as a whole)."""
        self.code = code
        """OpenAI's machine-readable code where it has one (``model_not_found``,
        ``context_length_exceeded``, ``invalid_api_key``)."""
        self.error_type = error_type or TYPES.get(status, "server_error")

    def body(self) -> dict[str, Any]:
        """The JSON body: ``{"error": {"message", "type", "param", "code"}}``."""
        return {"error": {"message": str(self), "type": self.error_type, "param": self.param,
                          "code": self.code if self.code is not None else self.status}}


def field_error(field: str, message: str) -> ApiError:
    """A request field with a value the server cannot take (400)."""
    return ApiError(f"{field}: {message}", 400, param=field)
