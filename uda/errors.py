"""The errors the library raises for a bad option, and the two ways a training run ends early."""


class ConfigError(ValueError):
    """A configuration value or key is invalid; the message names it and says what to do."""


class NonFiniteLossError(RuntimeError):
    """The loss was NaN/inf for too many steps in a row; the message names the last good checkpoint."""


class RunStopped(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped training after the step it was in, whose checkpoint was saved; running
    the same command again continues from it. A KeyboardInterrupt, so that nothing that catches
    errors (a sweep going on to its next run) mistakes a stop for a failed run."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum
