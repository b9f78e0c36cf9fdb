"""Shared fixtures of the simulation's tests."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _restore_log_levels() -> Iterator[None]:
    """A simulated world quiets the product's loggers for its run (``sim.world``, ``sim.lambdas``); put every logger's
    level back afterwards, so tests later in the same process that read the product's logs see them."""
    levels = {
        name: logger.level
        for name, logger in logging.root.manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
    }
    yield
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger):
            logger.setLevel(levels.get(name, logging.NOTSET))
