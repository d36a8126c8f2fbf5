"""The two ways a request can fail, kept apart (STYLE lesson 3).

`InputError`: the input itself is wrong (exit code 2).  `PlacementInfeasible`: the input is fine
but no layout satisfies it (exit code 1).  Both carry a one-paragraph message that names the field or
the binding constraint, the numbers, and a fix.  Anything else escaping the core is a bug.
"""


class InputError(ValueError):
    """Bad user input: names the field, the value and the fix."""


class PlacementInfeasible(Exception):
    """No layout satisfies the request; the message names the binding constraint with numbers."""

    def __init__(self, message: str, *, binding: str = "memory") -> None:
        super().__init__(message)
        self.binding = binding
