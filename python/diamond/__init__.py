"""diamond: shape and type inference, auditing, optimization and execution
of ONNX (and TorchScript) models.

Every function takes the model as a path, as bytes, or as an
``onnx.ModelProto`` (``onnx`` is needed only for the last), releases the GIL
while it works, and raises :class:`ReadError` for a model it cannot read and
:class:`ModelError` (carrying the :class:`Report`) for a model with errors::

    import diamond
    report = diamond.check("model.onnx")
    print(report.values["logits"].shape)      # ('batch', 1000)
    model = diamond.optimize(onnx_model)       # an onnx.ModelProto back
    outputs = diamond.run("model.onnx", {"x": x})
    session = diamond.Session("model.onnx")   # prepared once
    (logits,) = session.run(["logits"], {"x": x})

The ``diamond`` command is installed with the package.
"""

from __future__ import annotations

import io
import os
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from . import _native
from ._batch import ConvertResult, convert_many
from ._errors import DiamondError, FallbackWarning, ModelError, ReadError
from ._models import DimLike, as_source, returned, shape_texts
from ._report import Diagnostic, Dim, Report, ValueInfo
from ._session import Session, native_feeds
from ._session import ValueInfo as SessionValueInfo

if TYPE_CHECKING:
    import numpy

__version__: str = _native.__version__

#: The optimizer's passes, in the order ``optimize`` runs them by default.
PASSES: Tuple[str, ...] = tuple(_native.PASS_NAMES)

__all__ = [
    "check",
    "convert",
    "optimize",
    "run",
    "Session",
    "SessionValueInfo",
    "convert_many",
    "Report",
    "ValueInfo",
    "Diagnostic",
    "Dim",
    "ConvertResult",
    "DiamondError",
    "ReadError",
    "ModelError",
    "FallbackWarning",
    "PASSES",
]

#: What the functions accept as a model: a path (``str`` or ``os.PathLike``),
#: ``bytes``, or an ``onnx.ModelProto`` — typed ``Any`` so that ``onnx`` need
#: not be installed.
ModelLike = Any


def _npy_bytes(array: Any) -> bytes:
    import numpy

    buffer = io.BytesIO()
    numpy.save(buffer, numpy.asarray(array), allow_pickle=False)
    return buffer.getvalue()


def check(
    model: ModelLike,
    bind: Optional[Mapping[str, Any]] = None,
    input_shapes: Optional[Mapping[str, Sequence[DimLike]]] = None,
    strict_units: bool = False,
) -> Report:
    """Infers every value's element type and shape and reports what is wrong,
    as ``diamond check`` does.

    Args:
        model: a path (ONNX, a TorchScript archive or IR text), ONNX bytes,
            or an ``onnx.ModelProto``.
        bind: graph inputs bound to constants (name → array-like): what the
            model computes from them is then known exactly (``--bind``).
        input_shapes: TorchScript input shapes, name → sizes and symbols
            (``{"x": ("batch", 3, 224, 224)}``).
        strict_units: treat stated size-1 axes as claims and report every
            place broadcasting widens one (``--strict-units``).

    Returns:
        The :class:`Report`; ``report.ok`` is ``False`` when it lists errors.

    Raises:
        ReadError: the model cannot be read, or its graph is malformed.
    """
    source, _ = as_source(model)
    bound = None if bind is None else [(name, _npy_bytes(value)) for name, value in bind.items()]
    native = _native.check(source, bound, shape_texts(input_shapes), strict_units)
    return Report._from_native(native)


def convert(
    model: ModelLike,
    value_info: bool = True,
    input_shapes: Optional[Mapping[str, Sequence[DimLike]]] = None,
    output: Optional[Union[str, "os.PathLike[str]"]] = None,
) -> Any:
    """Re-exports the model as ONNX with every inferred type and shape in
    ``value_info`` (``diamond convert``).

    Returns the same kind of model it was given: an ``onnx.ModelProto`` for
    a ``ModelProto``, else ``bytes``. With ``output``, writes the model
    there (external data beside it) and returns ``None``.

    Raises:
        ReadError: the model cannot be read.
        ModelError: checking found errors (``error.report`` lists them).
    """
    source, kind = as_source(model)
    target = None if output is None else os.fspath(output)
    data = _native.convert(source, value_info, shape_texts(input_shapes), target)
    return None if data is None else returned(data, kind, model)


def optimize(
    model: ModelLike,
    verify: bool = True,
    passes: Optional[Sequence[str]] = None,
    input_shapes: Optional[Mapping[str, Sequence[DimLike]]] = None,
    output: Optional[Union[str, "os.PathLike[str]"]] = None,
) -> Any:
    """Simplifies the model into smaller standard ONNX (``diamond
    optimize``): folds shape arithmetic, drops no-ops and dead code, fuses
    and merges; inputs, outputs and their dim names are kept.

    Args:
        verify: run the original and the result on the reference executor
            (random inputs, several symbol values) and refuse a result that
            computes something else.
        passes: the passes to run, in order (default: all, see
            :data:`PASSES`).
        output: write the result there (returns ``None``).

    Returns:
        The same kind of model it was given (``ModelProto`` or ``bytes``).

    Raises:
        ReadError: the model cannot be read.
        ModelError: the model has errors (with the report), or verification
            found the result differs.
        ValueError: an unknown pass.
    """
    source, kind = as_source(model)
    target = None if output is None else os.fspath(output)
    names = None if passes is None else list(passes)
    data = _native.optimize(source, verify, names, shape_texts(input_shapes), target)
    return None if data is None else returned(data, kind, model)


def run(
    model: ModelLike,
    inputs: Mapping[str, Any],
    input_shapes: Optional[Mapping[str, Sequence[DimLike]]] = None,
    backend: str = "simd",
) -> Dict[str, "numpy.ndarray"]:
    """Runs the model once (``diamond run``): a :class:`Session` made and
    used once. Prepare a :class:`Session` to run a model many times.

    Args:
        inputs: graph input name → ``numpy.ndarray`` of the declared element
            type (a list of arrays for a sequence input, ``None`` for an
            empty optional). Inputs with an initializer may be left out.
        backend: ``"simd"`` (fused kernels) or ``"reference"`` (the plain
            kernels, the oracle the others are held to).

    Returns:
        Output name → ``numpy.ndarray``, in the graph's order (a list for a
        sequence output). The arrays own the executor's buffers (no copy);
        bfloat16, float8, float4 and 4-/2-bit integer outputs come widened
        exactly to float32, int8 or uint8.

    Raises:
        ReadError: the model cannot be read.
        ValueError: an input is missing or does not fit the model.
        ModelError: a node's operands break its operator's contract.
        NotImplementedError: an operator the executor lacks.
    """
    source, _ = as_source(model)
    return _native.run(source, native_feeds(inputs), shape_texts(input_shapes), backend)
