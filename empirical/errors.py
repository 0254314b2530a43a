"""The exception every error of the empirical package derives from."""


class EmpiricalError(Exception):
    """Bad input to a measurement, or a measurement that cannot be made honestly.

    Messages say what was expected, what arrived, and what to do about it.
    """
