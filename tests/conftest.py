import pytest

from dspsim.config import load_model

# loaded before any test registers an op of its own (a module fixture may keep one
# registered while it lasts): the session's J6 model holds the packaged ops' tables only
_J6 = load_model()


@pytest.fixture(scope="session")
def j6():
    return _J6


from tests.two_memories import two_memories_run  # noqa: E402, F401  (a shared fixture)
