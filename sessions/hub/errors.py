"""What goes wrong when a model is fetched from the Hub, in one sentence for the user."""

from __future__ import annotations

from sessions.errors import ControllerError


class HubError(ControllerError):
    """A model that cannot be fetched by name: a bad name, a missing repository or file,
    the Hub out of reach, a download cut short. Bytes already downloaded are kept."""


class DownloadStopped(HubError):
    """The user stopped a download (the bytes fetched so far are dropped)."""
