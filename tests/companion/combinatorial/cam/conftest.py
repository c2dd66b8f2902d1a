import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    """These graphs are small: one thread runs a training step about 3x faster than two on two busy cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
