"""Widgets of the chat screen: each shows one thing and holds no chat logic."""
