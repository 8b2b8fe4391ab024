"""The exceptions diamond raises.

Every failure is a :class:`DiamondError`: a model that cannot be read (not
ONNX, truncated, a malformed graph) is a :class:`ReadError`; a model that is
read but has errors is a :class:`ModelError`, which carries the check
report that lists them. A bad argument is a ``ValueError`` or ``TypeError``
as usual, and nothing a model holds crashes the interpreter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from ._report import Report


class DiamondError(Exception):
    """Base class of diamond's exceptions."""


class ReadError(DiamondError):
    """The model could not be read: no such file, not ONNX or TorchScript,
    truncated or corrupt bytes, or a malformed graph (a cycle, a dangling
    name). ``diamond check`` exits 2 on the same models."""


class ModelError(DiamondError):
    """The model was read but has errors (``diamond check`` exits 1 on it),
    or running or verifying it failed.

    ``report`` is the check report listing the errors, or ``None`` when the
    problem was found by the executor or by verification rather than by the
    check.
    """

    report: Optional["Report"]

    def __init__(self, message: str, report: Any = None) -> None:
        super().__init__(message)
        if report is not None and not _is_report(report):
            from ._report import Report

            report = Report._from_native(report)
        self.report = report


def _is_report(obj: Any) -> bool:
    from ._report import Report

    return isinstance(obj, Report)


class FallbackWarning(RuntimeWarning):
    """A :class:`diamond.Session` on the simd backend runs some steps on the
    reference kernels (an operator, element type or shape the fused kernels
    do not cover): the results are right, the speed is not that of the fast
    path. The message lists each step and why; ``Session.fallbacks()``
    returns the same lines."""
