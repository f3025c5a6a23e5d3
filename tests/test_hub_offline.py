"""An unreachable Hugging Face Hub is one line naming the local alternatives, after one request and no retries."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pyarrow.parquet as pq
import pytest

from kernels_ref import HUB_ID
from opgen.hub import hub_unreachable
from opgen.records import dataset_table
from opgen.sample.sampler import sample_records
from tests.conftest import REPO


def closed_port() -> int:
    """A local port nothing listens on: a connection to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def opgen_without_kernelbench(*args: str, endpoint: str) -> subprocess.CompletedProcess:
    """`opgen ARGS` told to read KernelBench from the Hub (OPGEN_KERNELBENCH names its id, so a local copy beside
    the clone is not looked for), with the Hub at `endpoint`."""
    env = {key: value for key, value in os.environ.items() if key not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(OPGEN_KERNELBENCH=HUB_ID, HF_ENDPOINT=endpoint, PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", "opgen", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("command", ["dedup", "audit"])
def test_an_unreachable_hub_is_one_line_naming_the_local_copy_and_no_retry(command, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(record) + "\n" for record in sample_records(0, 0, 2)))
    dataset = tmp_path / "dataset" / "data"   # a folder as `datasets` reads it, with its loading progress
    dataset.mkdir(parents=True)
    pq.write_table(dataset_table(sample_records(0, 0, 2)), dataset / "train-00000-of-00001.parquet")
    args = {"dedup": ["dedup", "--input", str(tasks), "--out", str(tmp_path / "v.jsonl")],
            "audit": ["audit", str(dataset.parent)]}[command]
    result = opgen_without_kernelbench(*args, endpoint=f"http://127.0.0.1:{closed_port()}")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith("opgen: error: cannot load KernelBench from the Hugging Face Hub")
    assert "--reference" in lines[0] and "OPGEN_KERNELBENCH" in lines[0] and "unreachable" in lines[0]
    assert "Retry" not in result.stderr + result.stdout


class _Answer(BaseHTTPRequestHandler):
    def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
        self.send_response(404)   # any answer means the Hub is there
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def test_the_probe_tells_an_answering_endpoint_from_a_silent_and_a_closed_one(monkeypatch):
    from huggingface_hub import constants

    server = HTTPServer(("127.0.0.1", 0), _Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    silent = socket.socket()   # accepts connections into its backlog and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(4)
    try:
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
        assert hub_unreachable(2.0) is None
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
        assert "127.0.0.1" in hub_unreachable(0.5)
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{closed_port()}")
        assert "unreachable" in hub_unreachable(2.0)
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
        assert hub_unreachable() == "HF_HUB_OFFLINE is set"
    finally:
        server.shutdown()
        silent.close()
