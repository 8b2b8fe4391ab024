"""The check report as Python objects: :class:`Report`, with a
:class:`ValueInfo` per value and a :class:`Diagnostic` per finding.

A report holds exactly the facts ``diamond check --json`` prints for the same
model (both are built from one document, ``diamond_exporters::report::json``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

#: One dimension: a size, a symbolic expression over the model's dim names
#: (``"batch"``, ``"2*seq"``), or ``None`` when nothing determines it.
Dim = Optional[Union[int, str]]


@dataclass(frozen=True)
class ValueInfo:
    """A value's inferred element type and shape.

    ``dtype`` is a NumPy-style name (``"float32"``) or ``None`` when unknown;
    ``shape`` is a tuple of :data:`Dim`, or ``None`` when even the rank is
    unknown; ``kind`` is ``"tensor"``, or e.g. ``"seq(tensor)"``.
    """

    dtype: Optional[str]
    shape: Optional[Tuple[Dim, ...]]
    kind: str = "tensor"


@dataclass(frozen=True)
class Diagnostic:
    """One finding of the check.

    ``code`` is the stable code (``"broadcast-conflict"``), ``severity`` one
    of ``"error"``, ``"warning"``, ``"info"``. ``node``/``op``/``node_index``
    locate it (``graph`` names the subgraph, ``None`` for the main graph),
    ``operand`` and ``axis`` say where on the node; ``chain`` is the
    provenance — why each fact in the message holds — ``help`` a
    suggested fix and ``help_uri`` the code's page (``diamond explain CODE``
    prints it). A warning that holds only under a condition on the
    dynamic sizes states it in ``condition`` (plain words, as the message
    does) and ``condition_exact`` (the sizes as the rules built them).
    """

    code: str
    severity: str
    message: str
    node: Optional[str] = None
    op: Optional[str] = None
    node_index: Optional[int] = None
    graph: Optional[str] = None
    operand: Optional[str] = None
    axis: Optional[int] = None
    chain: Tuple[str, ...] = ()
    help: Optional[str] = None
    help_uri: Optional[str] = None
    condition: Optional[str] = None
    condition_exact: Optional[str] = None

    def __str__(self) -> str:
        where = f" at {self.op} '{self.node}'" if self.node is not None and self.op is not None else ""
        return f"{self.severity}[{self.code}]{where}: {self.message}"


class Report:
    """What :func:`diamond.check` found: every value's element type and
    shape, and the diagnostics.

    Attributes:
        model: the model as given (its path, or ``"<bytes>"``).
        inputs, outputs: the main graph's input names (initializers left
            out) and output names.
        values: value name → :class:`ValueInfo`, in graph order
            (initializers included).
        inferred_from_use: inputs whose shape (in part) was inferred from
            how the graph uses them.
        from_declaration: values whose shape only a declaration gives.
        diagnostics: every finding, errors, warnings and notes.
    """

    def __init__(self, native: Any) -> None:
        self._native = native
        document: Dict[str, Any] = native.document()
        self.model: str = document["model"]
        self.inputs: List[str] = list(document["inputs"])
        self.outputs: List[str] = list(document["outputs"])
        self.values: Dict[str, ValueInfo] = {
            name: ValueInfo(
                dtype=v["dtype"],
                shape=None if v["shape"] is None else tuple(v["shape"]),
                kind=v.get("kind", "tensor"),
            )
            for name, v in document["values"].items()
        }
        self.inferred_from_use: List[str] = list(document["inferred_from_use"])
        self.from_declaration: List[str] = list(document["from_declaration"])
        self.diagnostics: List[Diagnostic] = [
            Diagnostic(
                code=d["code"],
                severity=d["severity"],
                message=d["message"],
                node=d["node"],
                op=d["op"],
                node_index=d["node_index"],
                graph=d["graph"],
                operand=d["operand"],
                axis=d["axis"],
                chain=tuple(d["chain"]),
                help=d["help"],
                help_uri=d.get("help_uri"),
                condition=d.get("condition"),
                condition_exact=d.get("condition_exact"),
            )
            for d in document["diagnostics"]
        ]
        self._assumptions = list(native.assumption_indices())

    @classmethod
    def _from_native(cls, native: Any) -> "Report":
        return cls(native)

    @classmethod
    def _from_document(cls, document: Dict[str, Any], assumptions: List[int]) -> "Report":
        """A report made in another process, from its plain data."""
        return cls(_Detached(document, assumptions))

    @property
    def errors(self) -> List[Diagnostic]:
        """The diagnostics of severity ``error``."""
        return [d for d in self.diagnostics if d.severity == "error"]

    @property
    def warnings(self) -> List[Diagnostic]:
        """The diagnostics of severity ``warning``."""
        return [d for d in self.diagnostics if d.severity == "warning"]

    @property
    def assumptions(self) -> List[Diagnostic]:
        """The diagnostics recording an assumption the check went on under
        (a dynamic axis taken to be a constant, an implied bound, a
        divisibility): the results hold only if these do."""
        return [self.diagnostics[i] for i in self._assumptions]

    @property
    def ok(self) -> bool:
        """``True`` when the check found no errors (warnings allowed), as
        ``diamond check`` exits 0."""
        return not self.errors

    def to_dict(self) -> Dict[str, Any]:
        """The ``diamond check --json`` document as a dict."""
        return self._native.document()

    def to_json(self) -> str:
        """The ``diamond check --json`` document, as the command prints it."""
        return self._native.json_text()

    def to_html(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the ``diamond check --html`` page (summary, diagnostics with
        a picture of the graph around each one's node, values, operators)
        to ``path``, atomically."""
        self._native.write_html(os.fspath(path))

    def __repr__(self) -> str:
        plural = lambda n, word: f"{n} {word}" + ("" if n == 1 else "s")  # noqa: E731
        return (
            f"<diamond.Report {self.model}: {plural(len(self.values), 'value')}, "
            f"{plural(len(self.errors), 'error')}, {plural(len(self.warnings), 'warning')}>"
        )

    def __str__(self) -> str:
        lines = [repr(self)]
        lines += [f"  {d}" for d in self.diagnostics]
        return "\n".join(lines)


class _Detached:
    """A report's data without the model, as it comes back from a worker
    process: everything but the HTML page, which needs the model."""

    def __init__(self, document: Dict[str, Any], assumptions: List[int]) -> None:
        self._document = document
        self._assumptions = assumptions

    def document(self) -> Dict[str, Any]:
        return self._document

    def assumption_indices(self) -> List[int]:
        return self._assumptions

    def json_text(self) -> str:
        import json

        return json.dumps(self._document, indent=2)

    def write_html(self, path: str) -> None:
        raise RuntimeError(
            f"{self._document.get('model')}: this report was made in another process and has no model to draw; "
            "check the model here (diamond.check) to write its HTML page"
        )
