"""``Session``: a model prepared once for a backend and run many times, with
the call shape of ``onnxruntime.InferenceSession``::

    session = diamond.Session("model.onnx")
    (logits,) = session.run(["logits"], {"x": x})
    outputs = session.run(None, {"x": x})        # every output, in order

The model is read, optimized and lowered to the SIMD backend's kernel
programs when the session is made; the first run binds it to its input
shapes, and a run with other shapes (another batch size, a longer
sequence) binds it again, keeping the decoded weights. Runs release the
GIL; one session runs one call at a time (calls from several threads
wait their turn), so give each thread its own session for parallel runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _native
from ._errors import FallbackWarning
from ._models import DimLike, as_source, shape_texts

if TYPE_CHECKING:
    import numpy

#: An axis as a session reports it: a size, a symbol (``"batch"``), or
#: ``None`` when not determined.
DimOut = Union[int, str, None]


@dataclass(frozen=True)
class ValueInfo:
    """An input or output of a :class:`Session`, as onnxruntime's
    ``NodeArg``: its ``name``, ``type`` (``"tensor(float)"``), ``shape``
    (inferred by the checker where the file leaves it out) and NumPy
    ``dtype`` name."""

    name: str
    dtype: Optional[str]
    shape: Optional[Tuple[DimOut, ...]]

    @property
    def type(self) -> str:
        """The ONNX type as onnxruntime writes it: ``tensor(float)``."""
        onnx_names = {"float32": "float", "float64": "double"}
        return f"tensor({onnx_names.get(self.dtype or '', self.dtype or '?')})"


def _info(entry: Tuple[str, Optional[str], Optional[List[DimOut]]]) -> ValueInfo:
    name, dtype, shape = entry
    return ValueInfo(name, dtype, tuple(shape) if shape is not None else None)


def native_feeds(feeds: Mapping[str, Any]) -> List[Tuple[str, Any]]:
    """``feeds`` as the native layer takes them: arrays in the machine's
    byte order, lists of arrays for sequences, ``None`` for empty optionals."""
    import numpy

    def native(value: Any) -> "numpy.ndarray":
        array = numpy.asarray(value)
        if not array.dtype.isnative:
            array = array.astype(array.dtype.newbyteorder("="))
        return array

    fed = []
    for name, value in feeds.items():
        if value is None:
            fed.append((name, None))
        elif isinstance(value, (list, tuple)):
            fed.append((name, [native(v) for v in value]))
        else:
            fed.append((name, native(value)))
    return fed


class Session:
    """A model prepared once and run many times.

    Args:
        model: a path (ONNX, a TorchScript archive or IR text), ONNX bytes,
            or an ``onnx.ModelProto``.
        backend: ``"simd"`` (fused kernels on the CPU's vector units; nodes
            they do not cover run on the reference kernels, listed by
            :meth:`fallbacks`) or ``"reference"`` (the plain kernels).
        threads: threads the kernels run on (default: one per core).
        input_shapes: shapes of TorchScript inputs, ``{"x": ("batch", 3, 224, 224)}``.
        optimize: apply ``diamond optimize``'s passes before lowering (the
            simd backend; as onnxruntime optimizes a model it loads).

    Raises:
        ReadError: the model cannot be read.
        ValueError: an unknown backend, or ``threads`` below 1.
        NotImplementedError: the backend is not available here (``cuda``
            without a GPU).
    """

    def __init__(
        self,
        model: Any,
        backend: str = "simd",
        threads: Optional[int] = None,
        input_shapes: Optional[Mapping[str, Sequence[DimLike]]] = None,
        optimize: bool = True,
    ) -> None:
        source, _ = as_source(model)
        self._native = _native.Session(source, backend, threads, shape_texts(input_shapes), optimize)
        self._announced = False

    @property
    def backend(self) -> str:
        """The backend the session runs on."""
        return self._native.backend

    def get_inputs(self) -> List[ValueInfo]:
        """The inputs a run feeds, in the graph's order."""
        return [_info(i) for i in self._native.inputs()]

    def get_outputs(self) -> List[ValueInfo]:
        """The outputs a run returns, in the graph's order (checked the
        first time a session is asked, not when it is made)."""
        return [_info(o) for o in self._native.outputs()]

    def run(
        self, output_names: Optional[Sequence[str]], input_feed: Mapping[str, Any]
    ) -> List["numpy.ndarray"]:
        """Runs the model, as ``InferenceSession.run``.

        Args:
            output_names: the outputs wanted, in the order wanted; ``None``
                for every output in the graph's order.
            input_feed: input name → ``numpy.ndarray`` (a list of arrays for
                a sequence input, ``None`` for an empty optional). Inputs
                with an initializer may be left out.

        Returns:
            The outputs asked for, as arrays (lists for sequence outputs).

        Raises:
            ValueError: an unknown or missing input, an unknown output name,
                or a shape that contradicts the model (the message names
                the input, the axis and the rule).
            NotImplementedError: an operator the backend lacks.
            ModelError: a node's operands break its operator's contract.
        """
        outputs = self.run_dict(input_feed)
        if output_names is None:
            return list(outputs.values())
        missing = [n for n in output_names if n not in outputs]
        if missing:
            raise ValueError(f"output '{missing[0]}': the model has no output of that name (outputs: {', '.join(outputs)})")
        return [outputs[n] for n in output_names]

    def run_dict(self, input_feed: Mapping[str, Any]) -> Dict[str, Any]:
        """:meth:`run`, every output by name, in the graph's order."""
        outputs = self._native.run(native_feeds(input_feed))
        if not self._announced:
            self._announced = True
            fallbacks = self._native.fallbacks()
            if fallbacks:
                import warnings

                steps = "; ".join(fallbacks)
                warnings.warn(
                    f"{self._native.label}: {len(fallbacks)} step(s) run on the reference kernels: {steps}",
                    FallbackWarning,
                    stacklevel=3,
                )
        return outputs

    def fallbacks(self) -> List[str]:
        """The simd backend's steps that ran on the reference kernels in the
        last binding, each naming the step and why (empty before a run)."""
        return self._native.fallbacks()

    def __repr__(self) -> str:
        return f"diamond.Session({self._native.label!r}, backend={self.backend!r})"
