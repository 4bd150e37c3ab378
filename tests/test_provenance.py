"""A result names the machine it came from: the CPU model from the OS, its vector extensions and the kernels torch
dispatches to (what decides the last bits of a CPU run's sums); an older result says it did not record them."""

import json
from pathlib import Path

import pytest
import torch

from bench.engine.result import RunResult
from bench.provenance import NOT_RECORDED, VECTOR_EXTENSIONS, _cpu_info, machine

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz
flags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512bw avx512_vnni
processor\t: 1
model name\t: another core, not read
"""


def test_the_cpu_model_and_its_vector_extensions_come_from_the_os():
    model, flags = _cpu_info(CPUINFO)
    assert model == "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"
    assert {"avx2", "avx512f", "avx512_vnni"} <= flags and "avx512_bf16" not in flags
    assert _cpu_info("") == ("unknown", set())


@pytest.mark.skipif(not Path("/proc/cpuinfo").is_file(), reason="Linux's /proc/cpuinfo")
def test_this_machine_is_named_not_its_architecture():
    here = machine()
    assert here["cpu_model"] not in ("unknown", "x86_64", "") and here["cpu_model"] == _cpu_info()[0]
    assert set(here["cpu_extensions"].split()) <= set(VECTOR_EXTENSIONS)
    assert here["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()


def test_a_result_records_the_machine_and_an_older_one_says_not_recorded(tmp_path, make_toy_corpus):
    from bench.engine.run import train
    from bench.engine.spec import RunSpec
    from tests.test_learning import SETTINGS

    data = make_toy_corpus(tmp_path)
    result = train(RunSpec("lstm", "tiny", "byte", "toy", 0, {**SETTINGS, "max_steps": 4, "eval_every": 4},
                           data_dir=str(data), out_dir=str(tmp_path / "run")), show_progress=False)
    row = result.flat()
    assert row["cpu_model"] == machine()["cpu_model"] == result.provenance.device["name"]
    assert row["torch_cpu_capability"] == machine()["torch_cpu_capability"] and row["threads"] >= 1
    older = json.loads((tmp_path / "run" / "result.json").read_text())
    for key in ("cpu_model", "cpu_extensions", "torch_cpu_capability"):
        del older["provenance"]["machine"][key]
    flat = RunResult.from_json(older).flat()
    assert flat["cpu_model"] == flat["cpu_extensions"] == flat["torch_cpu_capability"] == NOT_RECORDED
