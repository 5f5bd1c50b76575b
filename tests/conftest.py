import pytest

from dspsim.config import load_model


@pytest.fixture(scope="session")
def j6():
    return load_model()


from tests.two_memories import two_memories_run  # noqa: E402, F401  (a shared fixture)
