"""The harness's typed errors. Exactly one place (app.trial) maps launch errors to an outcome;
the CLI maps ConfigError to exit code 2."""
from __future__ import annotations


class HarnessError(Exception):
    """Base of every error the harness raises on purpose."""


class ConfigError(HarnessError):
    """Bad input: names the file and the key, and says what was expected."""

    def __init__(self, message: str, *, file: str | None = None, key: str | None = None):
        self.file, self.key, self.message = file, key, message
        where = ": ".join(p for p in (file, key) if p)
        super().__init__(f"{where}: {message}" if where else message)


class PatchFailed(HarnessError):
    """A patch did not apply; carries git's own message."""

    def __init__(self, patch: str, git_message: str):
        self.patch, self.git_message = patch, git_message
        super().__init__(f"patch {patch} does not apply: {git_message.strip()}")


class SourceError(HarnessError):
    """The target's source could not be prepared (not a repository, ref missing, git failed)."""


class InfraError(HarnessError):
    """The host is not fit to run the trial (port in use, unhealthy device)."""


class NoCampaign(HarnessError):
    """A report or load found no stored trial of the matrix where it looked."""

    def __init__(self, matrix: str, root: str):
        self.matrix, self.root = matrix, root
        super().__init__(f"no campaign of matrix {matrix!r} under {root} (nothing stored there); run it first "
                         f"(harness run matrix={matrix}) or point at its store with runs_dir=PATH")
