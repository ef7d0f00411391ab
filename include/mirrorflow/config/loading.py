"""Loading a configuration: read, resolve and validate it. Apart from model.py, which holds what a
configuration is and reads one without judging it, so that the checks (validation.py and its
neighbours, which take a MirrorConfig) and the model never import each other."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from mirrorflow.config.model import MirrorConfig, parse_config
from mirrorflow.config.problems import ConfigError, unique
from mirrorflow.config.validation import validate

log = logging.getLogger("mirrorflow.config")


def load_config(path_or_text: str | os.PathLike[str], *, env: Mapping[str, str] = os.environ) -> MirrorConfig:
    """Read, resolve and validate an mm2.properties (path or text); raises ConfigError listing every error.

    `env` is what the `env` config provider reads (default: os.environ). Warnings are logged
    and kept on the result as `warnings`.
    """
    config = parse_config(path_or_text, env=env)
    problems = unique(validate(config))
    if any(p.is_error for p in problems):
        raise ConfigError(problems, config.source)
    for problem in problems:
        log.warning("%s: %s", config.source, problem)
    return MirrorConfig(config.source, config.settings, config.parse_problems, tuple(problems), config._flows)
