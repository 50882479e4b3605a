"""Screens of the app: the chat screen and the screens pushed over it."""
