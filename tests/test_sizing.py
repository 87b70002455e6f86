"""Bloom sizing: m = -n ln p / (ln 2)^2 bits, k = round((m/n) ln 2) hashes; and `python -m frontier params`."""

from __future__ import annotations

import math
import re
import subprocess
import sys

import pytest

from frontier import BloomParameters, ConfigError, bloom_parameters
from frontier.__main__ import main, min_partitions

LN2 = math.log(2)


@pytest.mark.parametrize(
    ("capacity", "error_rate", "bits", "hashes"),
    [
        (1_000_000, 0.01, 9_585_059, 7),  # the textbook 9.585 bits per item, 7 hashes
        (1_000_000, 1e-3, 14_377_588, 10),
        (10_000_000, 1e-4, 191_701_168, 13),
        (1_000_000_000, 1e-6, 28_755_175_133, 20),
        (10_000_000_000, 1e-4, 191_701_167_548, 13),  # the 10-billion-URL blacklist
        (100, 0.5, 145, 1),
    ],
)
def test_formula_table(capacity: int, error_rate: float, bits: int, hashes: int) -> None:
    params = bloom_parameters(capacity, error_rate)
    assert isinstance(params, BloomParameters)
    assert params.capacity == capacity and params.error_rate == error_rate
    assert params.bits == bits == math.ceil(-capacity * math.log(error_rate) / LN2**2)
    assert params.hashes == hashes == round(bits / capacity * LN2)
    assert params.bytes == math.ceil(bits / 8)
    assert 0 <= params.bits_per_item - (-math.log(error_rate) / LN2**2) < 1 / capacity  # m rounded up to a bit
    # (1 - e^(-kn/m))^k: at the target, off only by k being a whole number
    assert params.expected_error_rate == pytest.approx(error_rate, rel=0.1)


def test_ten_billion_urls_fit_in_30_gb() -> None:
    params = bloom_parameters(capacity=10e9, error_rate=1e-4)  # a float capacity that is a whole number is fine
    assert params.capacity == 10_000_000_000
    assert params.hashes == 13
    assert params.bytes / 1e9 == pytest.approx(23.96, abs=0.01)
    assert params.bytes < 30e9
    assert min_partitions(params.bits) == 64  # 44.6 x 2^32 bits, rounded up to a power of two
    assert params.bits / 64 < 2**32 <= params.bits / 32


def test_tiny_filters_keep_a_floor() -> None:
    params = bloom_parameters(1, 0.5)
    assert params.bits == 64
    assert params.hashes == round(64 * LN2)


def test_parameters_are_frozen() -> None:
    params = bloom_parameters(1000, 0.01)
    with pytest.raises(AttributeError):
        params.bits = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("capacity", "error_rate", "key"),
    [
        (0, 0.01, "capacity"),
        (-5, 0.01, "capacity"),
        (1.5, 0.01, "capacity"),
        (float("inf"), 0.01, "capacity"),
        (float("nan"), 0.01, "capacity"),
        ("1000", 0.01, "capacity"),
        (True, 0.01, "capacity"),
        (None, 0.01, "capacity"),
        (1000, 0, "error_rate"),
        (1000, 1, "error_rate"),
        (1000, 1.5, "error_rate"),
        (1000, -0.1, "error_rate"),
        (1000, float("nan"), "error_rate"),
        (1000, "0.01", "error_rate"),
        (1000, True, "error_rate"),
    ],
)
def test_invalid_inputs_raise_config_error(capacity: object, error_rate: object, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        bloom_parameters(capacity, error_rate)  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError)
    assert info.value.key == key
    assert key in str(info.value)


@pytest.mark.parametrize(("bits", "partitions"), [(1, 1), (2**32 - 1, 1), (2**32, 2), (191_701_167_548, 64),
                                                  (2**32 * 64, 128)])
def test_min_partitions(bits: int, partitions: int) -> None:
    assert min_partitions(bits) == partitions
    assert -(-bits // partitions) < 2**32
    assert partitions == 1 or -(-bits // (partitions // 2)) >= 2**32


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "frontier", *args], capture_output=True, text=True, timeout=60)


def test_params_command_prints_the_figures() -> None:
    done = _run("params", "--capacity", "10e9", "--error-rate", "1e-4")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "191,701,167,548" in out  # bits
    assert re.search(r"hashes\s+13\b", out)
    assert "23.96 GB" in out and "22.32 GiB" in out
    assert "19.17" in out  # bits per URL
    assert re.search(r"expected FP rate\s+0\.0001", out)
    assert "fits in 30 GB" in out and "NOT" not in out.split("SharedBloom")[0]
    # the layout SharedBloom would allocate: generation 0 at p*(1-r), in 64 partitions under 2^32 bits
    from frontier.bloom import TIGHTENING, _Generation

    allocated = _Generation.nbytes(10_000_000_000, 1e-4 * (1 - TIGHTENING), 64) / 1e9
    assert 23.96 < allocated <= 1.05 * 23.96  # within 5% of the optimum, and under the 30 GB budget
    assert "partitions=64" in out
    assert ">= 64 partitions" in out
    assert f"{allocated:.2f} GB" in out
    assert "growth stops here" in out  # generation 1 needs 128 partitions: the report says so


def test_params_budget_and_partitions() -> None:
    done = _run("params", "--capacity", "10_000_000_000", "--error-rate", "0.0001", "--budget-gb", "20")
    assert done.returncode == 0, done.stderr
    assert "does NOT fit in 20 GB" in done.stdout

    too_few = _run("params", "--capacity", "10e9", "--error-rate", "1e-4", "--partitions", "16")
    assert too_few.returncode == 1  # SharedBloom.create would refuse this layout
    assert "use --partitions 64 or more" in too_few.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--capacity", "0", "--error-rate", "1e-4"], "--capacity: must be at least 1"),
        (["--capacity", "1e6", "--error-rate", "1.5"], "--error-rate: must be a number strictly between 0 and 1"),
        (["--capacity", "1.5", "--error-rate", "0.1"], "--capacity: must be a whole number"),
        (["--capacity", "lots", "--error-rate", "0.1"], "not a number: 'lots'"),
        (["--capacity", "1000", "--error-rate", "0.1", "--partitions", "3"], "power of two"),
        (["--capacity", "1000", "--error-rate", "0.1", "--budget-gb", "0"], "--budget-gb must be a positive"),
        (["--error-rate", "0.1"], "--capacity"),
    ],
)
def test_params_bad_arguments_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["params", *args])
    assert info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("args", [["--capacity", "0", "--error-rate", "1e-4"],
                                  ["--capacity", "10e9", "--error-rate", "1.5"]])
def test_params_bad_arguments_exit_2_in_a_subprocess(args: list[str]) -> None:
    done = _run("params", *args)
    assert done.returncode == 2
    assert "error: --" in done.stderr
    assert "Traceback" not in done.stderr


def test_main_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["params", "--capacity", "1000000", "--error-rate", "0.01"]) == 0
    assert "9,585,059" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
