"""The `mirrorflow` command's --log-level (tests/integration/test_cli_logs.py runs it on Kafka)."""

from __future__ import annotations

import logging

from click.testing import CliRunner

from mirrorflow import logs
from mirrorflow.cli import main


def test_a_log_level_that_is_not_one_is_refused_naming_the_levels() -> None:
    refused = CliRunner().invoke(main, ["--log-level", "loud", "validate", "--help"])

    assert refused.exit_code == 2, refused.output
    assert "--log-level" in refused.output and "'loud' is not one of" in refused.output, refused.output
    assert all(level in refused.output for level in ("debug", "info", "warning", "error")), refused.output


def test_a_spawned_worker_logs_as_the_process_that_spawned_it() -> None:
    """What the command's worker processes do first (logs.spawned with the command's level): one
    handler on stderr, whatever number of times it is called, at the level given."""
    root = logging.getLogger()
    handlers, level, configured = list(root.handlers), root.level, logs.level()
    # A command run earlier in this process (click's test runner) set up its handler already.
    for handler in [h for h in handlers if isinstance(h, logs._Stderr)]:
        root.removeHandler(handler)
    logs._configured = None
    try:
        logs.spawned(None)
        assert logs.level() is None and not [h for h in root.handlers if isinstance(h, logs._Stderr)]
        logs.spawned("info")
        logs.spawned("INFO")
        added = [h for h in root.handlers if isinstance(h, logs._Stderr)]
        assert len(added) == 1 and root.level == logging.INFO and logs.level() == "INFO"
        record = logging.LogRecord("mirrorflow.window", logging.WARNING, __file__, 1, "slot %d", (3,), None)
        assert added[0].format(record).endswith(" WARNING mirrorflow.window: slot 3")
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
        logs._configured = configured
