"""The commented example written by ``llamachat config --init``.

Every setting appears commented out with its default, so the file documents itself and
changes nothing until a line is uncommented. The defaults are filled in from the
dataclasses, so the template cannot drift from the code (a test uncomments every line
and checks the result loads to the defaults, except the settings that have no default
and show an example instead: the model, its folders, threads, the RPC servers...).
"""

from __future__ import annotations

import textwrap

from sessions.config.model import Config
from sessions.config.sizes import size_text
from sessions.config.toml_text import render_value as _value
from sessions.templates.families import BY_NAME


def _builtin_names() -> str:
    names = ", ".join(BY_NAME)
    return textwrap.fill(names, width=90, initial_indent="#   ", subsequent_indent="#   ",
                         break_on_hyphens=False)


def config_template() -> str:
    """A complete, commented ``config.toml`` that leaves every setting at its default."""
    c = Config()
    s, k = c.sampling, c.checkpoints
    return f"""\
# llamachat configuration. Every line below is commented out and shows the default (or an
# example, where a setting has none); uncomment a line and change its value to use your
# own. Command-line flags (such as -m, -c, -ngl, --theme) override these for one run.

# GGUF model loaded at start (a path); leave unset to pick one from the model list.
# model = "~/models/qwen2.5-1.5b-instruct-q4_k_m.gguf"

# Extra folders searched recursively for *.gguf files. The Hugging Face cache, LM Studio's
# folders and llama.cpp's cache are always searched.
# model_dirs = ["~/models"]

# Context size in tokens (0 uses the model's trained context length).
# n_ctx = {c.n_ctx}
# Most tokens evaluated in one call while reading a prompt.
# n_batch = {c.n_batch}
# Layers offloaded to the GPUs (and RPC servers): a number (0: CPU only, -1: all), "all", or
# "auto": every layer that fits their free memory (none without a GPU).
# n_gpu_layers = {_value(c.n_gpu_layers)}
# CPU threads; leave unset to use every core but one (at most 8).
# threads = 4
# Types of the K and V caches: f16, or a quantized type that takes less memory per token
# of context (q8_0 about half; also q4_0, q4_1, iq4_nl, q5_0, q5_1, bf16, f32).
# cache_type_k = {_value(c.cache_type_k)}
# cache_type_v = {_value(c.cache_type_v)}
# RPC servers of other machines (`llamachat rpc-server` there) that take the offloaded
# layers (n_gpu_layers); the protocol has no authentication: trusted networks only.
# rpc = ["192.168.1.20:50052", "192.168.1.21:50052"]
# Share of the offloaded layers per device: RPC servers first (in rpc order), then local
# GPUs; leave empty to split by free memory.
# tensor_split = [1.0, 1.0]
# Seed for sampling replies (-1: a new one every reply); --seed sets it for one run.
# seed = {c.seed}

# System message put at the start of every new session.
# system_prompt = "You are a helpful assistant."

# Colour theme: a built-in name or a theme file in the themes/ folder beside this file.
# theme = {_value(c.theme)}

# Columns of the tree panel (unset: 40% of the window); its < and > keys and a drag of
# its edge set it, and the app writes it here.
# tree_width = 48

# Sampling presets of your own: a table of sampling keys each, applied to a chat from its
# settings (Ctrl+S), the values it names only. A model's own recommended settings (from its
# file, or its family's published ones) are offered there too, and start its new chats.
#   [presets.precise]
#   temperature = 0.2
# presets = {{ precise = {{ temperature = 0.2, top_p = 0.9 }}, loose = {{ temperature = 1.1 }} }}

# Minutes a deleted message or chat can be brought back with Ctrl+Z (unset: until the
# app closes, 0: never); after that the deletion is final and a chat's checkpoint files go.
# undo_minutes = 30

# A Jinja chat template used for every model instead of the one inside its file (a path
# relative to this file's folder, or absolute); --chat-template-file sets it for one run.
# It wins over the [models] tables below: leave it unset to use their per-model templates.
# chat_template_file = "templates/chatml.jinja"

# Variables given to every model's chat template, as llama.cpp's --chat-template-kwargs
# (which sets them for one run, over everything here): enable_thinking = false turns
# Qwen3's and Gemma 4's reasoning off, reasoning_effort = "high" sets gpt-oss's. A
# [models] entry's own win over these.
# chat_template_kwargs = {{ enable_thinking = false }}

# Default sampling settings for new sessions (each session keeps its own copy).
[sampling]
# temperature = {_value(s.temperature)}     # 0 always picks the most likely token
# top_k = {s.top_k}             # 0 disables
# top_p = {_value(s.top_p)}           # 1.0 disables
# min_p = {_value(s.min_p)}           # 0 disables
# repeat_penalty = {_value(s.repeat_penalty)}   # 1.0 disables
# repeat_last_n = {s.repeat_last_n}
# seed = {s.seed}             # -1: a new seed for every reply
# max_tokens = {s.max_tokens}

# Saved model state, so switching branches or reopening a chat skips re-reading the prompt.
[checkpoints]
# enabled = {_value(k.enabled)}
# ram_mb = {k.ram_mb}          # memory for checkpoints kept in RAM, in MiB
# max_disk = {_value(size_text(k.max_disk))}    # disk space for checkpoint files: "500MB", "20GiB", or a number
#                        of MiB; the chats used least recently lose theirs first. The older
#                        disk_mb (in MiB) is read too; max_disk wins over it.
# interval = {k.interval}        # inside a long message, also save every this many tokens (closer
#                        for a sliding window or recurrent state: one window, or 256 tokens)
# parked_mb = {k.parked_mb}       # GPU memory, in MiB, that branches left a moment ago keep there
#                        whole, so going back moves nothing through the host (0: off)

# Settings for particular models, one entry per model: a file name ("*" matches any text,
# "?" one character), or a path. chat_template names a built-in template or holds Jinja text;
# chat_template_file is a Jinja file. Either replaces the template inside the model file,
# and runs in the same sandbox; chat_template_kwargs gives the template variables. The
# built-in templates:
{_builtin_names()}
# Written as tables, an entry reads:
#   [models."gemma-3-270m-it-Q8_0.gguf"]
#   chat_template = "gemma"
[models]
# "gemma-3-*.gguf" = {{ chat_template = "gemma" }}
# "~/models/my-finetune.gguf" = {{ chat_template_file = "templates/my-finetune.jinja" }}
# "Qwen3-*.gguf" = {{ chat_template_kwargs = {{ enable_thinking = true }} }}

# Key overrides: action id = key (the help screen lists the action ids).
[keys]
# regenerate = "ctrl+r"
"""
