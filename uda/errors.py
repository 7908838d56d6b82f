"""The error a bad option raises (shared by the config and the task registry, which the config reads)."""


class ConfigError(ValueError):
    """A configuration value or key is invalid; the message names it and says what to do."""
