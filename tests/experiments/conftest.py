"""Experiment tests run torch on one thread (steadier on a shared 2-core box) and restore the
session's setting afterwards, also when the code under test changes it (ranking.main does)."""

import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
