"""The model argument every function takes: a path, bytes, or an
``onnx.ModelProto`` (recognised by its ``SerializeToString`` method, so
``onnx`` need not be installed for the other two), and the result returned
in the kind that was given."""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Sequence, Tuple, Union

PathLike = Union[str, "os.PathLike[str]"]
DimLike = Union[int, str]


def as_source(model: Any) -> Tuple[Union[str, bytes], str]:
    """``(path or bytes, kind)`` for ``model``; kind is ``path``, ``bytes`` or ``proto``."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model), "bytes"
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model), "path"
    serialize = getattr(model, "SerializeToString", None)
    if callable(serialize):
        return serialize(), "proto"
    raise TypeError(f"a model is a path, bytes or an onnx.ModelProto, not {type(model).__name__}")


def returned(data: bytes, kind: str, original: Any) -> Any:
    """``data`` as the caller gave the model: a new message of the same
    class for a ``ModelProto``, else the bytes themselves."""
    if kind == "proto":
        message = type(original)()
        message.ParseFromString(data)
        return message
    return data


def shape_texts(input_shapes: Optional[Mapping[str, Sequence[DimLike]]]) -> Optional[list]:
    """``{"x": ("batch", 3, 224, 224)}`` as ``["x=batch,3,224,224"]``, the
    ``--input-shape`` form the native layer parses."""
    if input_shapes is None:
        return None
    texts = []
    for name, dims in input_shapes.items():
        if isinstance(dims, (str, bytes)):
            raise TypeError(f"input_shapes['{name}']: give a sequence of sizes and symbols, not a string")
        texts.append(f"{name}=" + ",".join(str(d) for d in dims))
    return texts
