"""RPC settings and checks: flags, config, probes, the compatibility key, the device lines."""

from __future__ import annotations

import dataclasses
import socket
import struct
import threading
import time

import pytest

from sessions.cli.runner import apply_flags
from sessions.config import Config
from sessions.engine.settings import EngineSettings
from sessions.llama.context import ContextParams
from sessions.llama.placement import Placement, PlacementLog, describe_devices
from sessions.rpc.endpoints import EndpointError, check_offload, parse_endpoints
from sessions.rpc.errors import REBUILD, RpcError
from sessions.rpc.probe import probe
from sessions.rpc.report import offload_line
from sessions.synth.archs import model_spec
from tests.cli_support import assert_one_line_error, run

from .conftest import split_settings, tiny_model
from .servers import free_port

pytestmark = pytest.mark.rpc


@pytest.mark.parametrize(("text", "words"), [
    ("nohost", "is not HOST:PORT"), (":50052", "is not HOST:PORT"), ("h:0", "from 1 to 65535"),
    ("h:70000", "from 1 to 65535"), ("h:x", "from 1 to 65535"), ("::1:50052", "IPv6"),
    ("a:1,a:1", "listed twice"), (",".join(f"h:{p}" for p in range(1, 18)), "at most 16"),
])
def test_bad_endpoints_are_named(text, words):
    with pytest.raises(EndpointError, match=words):
        parse_endpoints(text)


def test_endpoints_are_canonical():
    assert parse_endpoints(" 10.0.0.2:050052 , gpu-box:50053,") == ("10.0.0.2:50052", "gpu-box:50053")


def test_flags_reach_the_engine_settings(capsys):
    from sessions.cli.parser import build_parser

    args = build_parser().parse_args(["--rpc", "10.0.0.2:50052,10.0.0.3:50052", "-ts", "3,1", "-ngl", "99"])
    config = apply_flags(Config(rpc=["elsewhere:1"]), args)
    settings = EngineSettings.from_config(config)
    assert settings.rpc == ("10.0.0.2:50052", "10.0.0.3:50052")
    assert settings.tensor_split == (3.0, 1.0) and settings.n_gpu_layers == 99
    off = apply_flags(Config(rpc=["elsewhere:1"]), build_parser().parse_args(["--rpc", ""]))
    assert off.rpc == []  # an empty --rpc turns the config's servers off for one run


def test_a_bad_rpc_flag_is_one_line(capsys):
    assert_one_line_error(*run(capsys, "--rpc", "box", "sessions"), "'box' is not HOST:PORT")


def test_config_problems_name_the_field_and_line(tmp_path, monkeypatch):
    from sessions.config import load_config

    path = tmp_path / "config.toml"
    path.write_text('n_ctx = 4096\nrpc = ["10.0.0.2:50052", "box"]\ntensor_split = [1, -1]\n')
    monkeypatch.setenv("LLAMACHAT_CONFIG", str(path))
    loaded = load_config()
    problems = {p.field: (p.line, str(p)) for p in loaded.problems}
    assert problems["rpc"][0] == 2 and "'box' is not HOST:PORT" in problems["rpc"][1]
    assert problems["tensor_split"][0] == 3
    assert loaded.config.n_ctx == 4096 and loaded.config.rpc == [] and loaded.config.tensor_split == []
    path.write_text('rpc = ["10.0.0.2:50052"]\ntensor_split = [2, 1.5]\n')
    loaded = load_config()
    assert loaded.problems == [] and loaded.config.rpc == ["10.0.0.2:50052"]
    assert loaded.config.tensor_split == [2.0, 1.5]


def test_the_compatibility_key_holds_the_split():
    plain = ContextParams()
    split = ContextParams(devices="CPU:0-0,RPC[10.0.0.2:50052]:1-4")
    assert "devices" not in plain.compat()  # states saved on the CPU keep their key
    assert split.compat() == plain.compat() + ";devices=CPU:0-0,RPC[10.0.0.2:50052]:1-4"


def test_placement_read_from_the_load_log():
    log = PlacementLog()
    for i, dev in enumerate(["CPU", "CPU", "RPC0", "RPC0", "RPC1"]):
        log(1, f"load_tensors: layer {i:3d} assigned to device {dev}, is_swa = 0")
    log(2, "llama_prepare_model_devices: using device RPC0 (127.0.0.1:1) - 1 MiB free")
    assert sorted(log.assigned.items()) == [(0, "CPU"), (1, "CPU"), (2, "RPC0"), (3, "RPC0"), (4, "RPC1")]
    placement = Placement(("CPU", "CPU", "RPC[a:1]", "RPC[a:1]", "RPC[b:2]"))
    assert placement.key() == "CPU:0-1,RPC[a:1]:2-3,RPC[b:2]:4-4"
    assert placement.summary() == "CPU + 2 RPC (a:1, b:2)"
    assert Placement(("CPU", "CPU")).key() == ""
    assert Placement(("CPU", "CUDA0[RTX]")).summary() == "CPU + CUDA0"
    assert describe_devices(object()) == ""


def test_with_ngl_0_no_layer_would_go_to_the_servers():
    check_offload([], 0)
    check_offload(["a:1"], -1)
    with pytest.raises(RpcError, match="with -ngl 0 no layer goes to the RPC servers: pass -ngl all"):
        check_offload(["a:1"], 0)


def test_a_build_without_rpc_says_how_to_rebuild(monkeypatch):
    from sessions.llama.native import ggml
    from sessions.rpc import backend, report

    without = dataclasses.replace(ggml(), reg_by_name=lambda name: None)
    monkeypatch.setattr(backend, "ggml", lambda: without)
    assert not backend.rpc_compiled_in()
    with pytest.raises(RpcError) as error:
        backend.add_servers(["127.0.0.1:1"])
    assert str(error.value) == f"this llama-cpp-python was built without the RPC backend; rebuild it with: {REBUILD}"
    assert "--no-cache-dir" in REBUILD and "-DGGML_RPC=on" in REBUILD
    assert f"no RPC backend (rebuild: {REBUILD})" in report.local_devices_line()


def test_probe_names_a_refused_a_silent_and_a_foreign_server():
    closed = f"127.0.0.1:{free_port()}"
    with pytest.raises(RpcError, match=f"RPC server {closed} is unreachable: connection refused"):
        probe(closed)
    with socket.socket() as silent:  # listens (the kernel accepts) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        endpoint = f"127.0.0.1:{silent.getsockname()[1]}"
        t0 = time.monotonic()
        with pytest.raises(RpcError, match="did not answer within 0.5 s: it is serving another client"):
            probe(endpoint, timeout=0.5)
        assert time.monotonic() - t0 < 3
    with socket.socket() as foreign:
        foreign.bind(("127.0.0.1", 0))
        foreign.listen()

        def answer() -> None:
            conn, _ = foreign.accept()
            with conn:
                conn.recv(64)
                conn.sendall(struct.pack("<Q", 3) + b"abc")

        threading.Thread(target=answer, daemon=True).start()
        with pytest.raises(RpcError, match="another llama.cpp version, or it is not an RPC server"):
            probe(f"127.0.0.1:{foreign.getsockname()[1]}")


def test_a_busy_server_is_named(shared_pair):
    """A server serves one client at a time: a second one is told, not left hanging."""
    from sessions.engine.process import EngineProcess

    engine = EngineProcess(tiny_model("llama"), split_settings("llama", shared_pair.endpoints), checkpoint_dir=None)
    try:
        assert describe_devices(engine) == f"CPU + 2 RPC ({', '.join(shared_pair.endpoints)})"
        with pytest.raises(RpcError, match=f"{shared_pair.endpoints[0]} accepted the connection but did not answer"):
            probe(shared_pair.endpoints[0], timeout=0.5)
    finally:
        engine.close()
    probe(shared_pair.endpoints[0])  # free again


def test_ngl_0_with_servers_is_refused_before_loading(shared_pair):
    from sessions.engine.process import EngineProcess

    with pytest.raises(RpcError, match="with -ngl 0"):
        EngineProcess(tiny_model("llama"), split_settings("llama", shared_pair.endpoints, n_gpu_layers=0),
                      checkpoint_dir=None)


def test_auto_puts_every_layer_that_fits_on_the_servers(shared_pair):
    """Each server offers its CPU's free memory, far more than the tiny model needs: with
    ``-ngl auto`` (the default) every layer goes to the servers, none to the local CPU."""
    from sessions.engine.process import EngineProcess

    settings = split_settings("llama", shared_pair.endpoints, n_gpu_layers="auto")
    engine = EngineProcess(tiny_model("llama"), settings, checkpoint_dir=None)
    try:
        layers = engine.placement.layers
    finally:
        engine.close()
    assert len(layers) == model_spec("llama", "tiny").n_layer + 1  # the repeating layers, then the output layer
    assert {label[:4] for label in layers} == {"RPC["}
    assert set(engine.placement.rpc_endpoints) == set(shared_pair.endpoints)


def test_models_and_help_show_the_devices(shared_pair, capsys):
    nobody = f"127.0.0.1:{free_port()}"
    code, _, out = run(capsys, "models", "--rpc", f"{shared_pair.endpoints[0]},{nobody}", "-ngl", "99")
    assert code == 0
    assert "llamachat: devices: CPU (" in out and "RPC backend built in" in out
    assert f"RPC server {shared_pair.endpoints[0]}: 1 device, " in out
    assert f"RPC server {nobody} is unreachable: connection refused" in out
    assert "offload (-ngl 99): 99 layers to 2 RPC servers; the rest on the CPU" in out
    out = run(capsys, "models", "--rpc", shared_pair.endpoints[0])[2]
    assert "offload (-ngl auto): the layers that fit to 1 RPC server; the rest on the CPU" in out
    out = run(capsys, "models")[2]
    assert offload_line([], "auto") in out
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "\ndevices: CPU (" in out


def test_the_offload_line_names_the_gpus_and_servers():
    gib = 1 << 30
    assert offload_line([], "auto", gpus=[3 * gib, gib]) == \
        "offload (-ngl auto): the layers that fit to 2 local GPUs (4.0 GiB free); the rest on the CPU"
    assert offload_line(["a:1"], 20, gpus=[gib]) == \
        "offload (-ngl 20): 20 layers to 1 RPC server, then 1 local GPU (1.0 GiB free); the rest on the CPU"
    assert offload_line([], "all", gpus=[]) == "offload (-ngl all): no GPU here, so every layer runs on the CPU"
