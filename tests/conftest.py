import pytest

from dspsim.config import load_model


@pytest.fixture(scope="session")
def j6():
    return load_model()
