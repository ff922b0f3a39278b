"""A guard for the remote tests (tests/test_remote*.py): a test that hangs there (a lock never
granted, a download never ending) ends its process with every thread's stack printed, so the run
fails with a message instead of stalling CI until the job's limit. Under xdist the worker crashes,
its test is reported failed and the other tests run on.

pytest-timeout is not a dependency; this is faulthandler's watchdog (a C thread: it fires even
when every Python thread is stuck holding or waiting for the GIL)."""

import faulthandler
import sys
import traceback

import pytest

HANG_SECONDS = 300  # far past the slowest remote test on a loaded 2-core runner (about 30 s)


def terminal_stderr(config: pytest.Config) -> int:
    """The descriptor of the run's own stderr: pytest's faulthandler plugin keeps a copy made before
    output capture (the test's captured stderr dies with the process, unread)."""
    try:
        from _pytest.faulthandler import fault_handler_stderr_fd_key  # noqa: PLC0415 (private: guarded)

        return config.stash[fault_handler_stderr_fd_key]
    except (ImportError, KeyError):
        return sys.__stderr__.fileno()


@pytest.fixture(autouse=True)
def hang_guard(request):
    """Autouse where imported: the test must end within HANG_SECONDS, or its process ends."""
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True, file=terminal_stderr(request.config))
    yield
    faulthandler.cancel_dump_traceback_later()


def text_of(exc: BaseException) -> str:
    """Everything a traceback of `exc` prints, and every message in its chain, suppressed ones too:
    what the credential checks search for a secret."""
    parts, seen, todo = ["".join(traceback.format_exception(exc))], set(), [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        parts += [repr(e), str(e)]
        todo += [e.__cause__, e.__context__]
    return "\n".join(parts)
