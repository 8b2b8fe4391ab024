"""Type stubs of the extension module ``diamond._native`` (Rust, pyo3).

The public API is ``diamond``; these are the functions it calls. A model is
a path or ONNX bytes here (``diamond`` serializes an ``onnx.ModelProto``).
"""

from typing import Any, Dict, List, Optional, Tuple, Union

import numpy

__version__: str
PASS_NAMES: List[str]

_Model = Union[str, bytes]

class Checked:
    """A checked model: its report, and the model for the HTML page."""

    @property
    def errors(self) -> int: ...
    @property
    def warnings(self) -> int: ...
    @property
    def label(self) -> str: ...
    def document(self) -> Dict[str, Any]: ...
    def json_text(self) -> str: ...
    def write_html(self, path: str) -> None: ...
    def assumption_indices(self) -> List[int]: ...

def check(
    model: _Model,
    bind: Optional[List[Tuple[str, bytes]]] = None,
    input_shapes: Optional[List[str]] = None,
    strict_units: bool = False,
) -> Checked: ...
def convert(
    model: _Model,
    value_info: bool = True,
    input_shapes: Optional[List[str]] = None,
    output: Optional[str] = None,
) -> Optional[bytes]: ...
def convert_file(input: str, output: str, value_info: bool = True) -> Tuple[str, Optional[str], Optional[Checked]]: ...
def optimize(
    model: _Model,
    verify: bool = True,
    passes: Optional[List[str]] = None,
    input_shapes: Optional[List[str]] = None,
    output: Optional[str] = None,
) -> Optional[bytes]: ...
_Fed = List[Tuple[str, Union[numpy.ndarray, List[numpy.ndarray], None]]]
_Described = Tuple[str, Optional[str], Optional[List[Union[int, str, None]]]]

def run(
    model: _Model,
    inputs: _Fed,
    input_shapes: Optional[List[str]] = None,
    backend: str = "simd",
) -> Dict[str, Any]: ...

class Session:
    """A model prepared once for a backend (the library's ``diamond::Session``)."""

    def __init__(
        self,
        model: _Model,
        backend: str = "simd",
        threads: Optional[int] = None,
        input_shapes: Optional[List[str]] = None,
        optimize: bool = True,
    ) -> None: ...
    @property
    def backend(self) -> str: ...
    @property
    def label(self) -> str: ...
    def run(self, inputs: _Fed) -> Dict[str, Any]: ...
    def inputs(self) -> List[_Described]: ...
    def outputs(self) -> List[_Described]: ...
    def fallbacks(self) -> List[str]: ...
