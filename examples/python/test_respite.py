"""pytest example: start respite as a test double and drive its clock.

Run (from the repository root, after `cargo build`):
    pip install redis pytest
    RESPITE_BIN=target/debug/respite pytest examples/python/test_respite.py
"""

import os
import subprocess

import pytest
import redis


@pytest.fixture
def respite():
    """A fresh respite server on a free port; yields a redis-py client."""
    binary = os.environ.get("RESPITE_BIN", "target/debug/respite")
    proc = subprocess.Popen(
        [binary, "--port", "0", "--enable-test-commands"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        # respite prints the port it bound as the first line on stdout.
        port = int(proc.stdout.readline())
        client = redis.Redis(port=port, decode_responses=True)
        yield client
        client.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_key_expires_when_the_clock_passes_its_ttl(respite):
    # ADVANCE switches respite to a manual clock: from now on time moves only when told.
    respite.execute_command("RESPITE", "CLOCK", "ADVANCE", 0)
    respite.set("session", "abc", px=5000)
    respite.execute_command("RESPITE", "CLOCK", "ADVANCE", 4999)
    assert respite.get("session") == "abc"
    respite.execute_command("RESPITE", "CLOCK", "ADVANCE", 2)
    assert respite.get("session") is None


def test_injected_failure(respite):
    # (Not LOADING here: redis-py retries those as connection errors.)
    respite.execute_command("RESPITE", "FAULT", "FAIL", 1, "CMD", "get", "ERR", "boom")
    with pytest.raises(redis.exceptions.ResponseError, match="boom"):
        respite.get("k")
    assert respite.get("k") is None


def test_command_log(respite):
    respite.set("a", "1")
    assert respite.execute_command("RESPITE", "LOG", "COUNT", "set") == 1
