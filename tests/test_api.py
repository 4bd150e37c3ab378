"""The README's Python API section runs as written, in a fresh folder beside a checkout's configs, with WikiText-2
fetched; and bench.api is what its docstring lists."""

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO


def readme_snippet() -> str:
    section = (REPO / "README.md").read_text().split("## Python API", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.slow
@pytest.mark.mirror
def test_the_readmes_python_api_section_runs_as_written(tmp_path, wt2_data_dir):
    (tmp_path / "configs").symlink_to(REPO / "configs")
    env = {**os.environ, "BENCH_DATA_DIR": str(wt2_data_dir), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", readme_snippet()], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "attack.png").stat().st_size > 10_000
    assert (tmp_path / "runs" / "api-lstm" / "result.json").is_file()
    table = done.stdout.splitlines()
    assert any("word-open:300" in line for line in table) and any(line.startswith("0 ") for line in table)


def test_the_api_is_what_its_docstring_lists():
    from bench import api

    listed = set(re.findall(r"api\.(\w+)\(", api.__doc__))
    assert listed <= set(api.__all__) and all(callable(getattr(api, name)) for name in api.__all__)
