import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    """The loop's models are tiny: on shared cores, torch's thread pool costs more than it gains (5x here)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
