"""How `make test` spreads the suite over its workers (tests/conftest.py): the longest modules handed out first, each
worker on its own CPU thread."""

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tests import conftest


def test_the_longest_modules_go_first_and_the_rest_keep_their_order():
    names = ["test_a.py", "test_train.py", "test_b.py", "test_gpu_runbook.py", "test_a.py"]
    items = [SimpleNamespace(path=Path("tests") / name, k=k) for k, name in enumerate(names)]
    conftest.pytest_collection_modifyitems(None, items)
    assert [(item.path.name, item.k) for item in items] == [
        ("test_gpu_runbook.py", 3), ("test_train.py", 1), ("test_a.py", 0), ("test_b.py", 2), ("test_a.py", 4)]


@pytest.mark.skipif(not os.environ.get("PYTEST_XDIST_WORKER"), reason="runs in a worker of `make test`")
def test_a_worker_trains_on_one_thread_unless_the_user_set_another_count():
    assert torch.get_num_threads() == int(os.environ["OMP_NUM_THREADS"])
