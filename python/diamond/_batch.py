"""``convert_many``: a batch of models converted on worker threads (each
conversion releases the GIL), the results yielded as they finish.

Inputs are files or directories (searched recursively for ``*.onnx``); the
outputs mirror them under ``out_dir`` as ``diamond convert`` does: a file
is written as ``out_dir/NAME``, a directory's models at their path relative
to it.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, List, Optional, Tuple, Union

from . import _native
from ._report import Report

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class ConvertResult:
    """How one model of a batch went.

    ``status`` is ``"converted"``, ``"errors"`` (checking found errors; not
    written, ``report`` lists them), ``"unreadable"`` (not a model, corrupt,
    malformed graph) or ``"failed"`` (could not be written); ``message``
    says why for all but ``"converted"``.
    """

    input: Path
    output: Path
    status: str
    message: Optional[str] = None
    report: Optional[Report] = None

    @property
    def ok(self) -> bool:
        """Whether the model was written."""
        return self.status == "converted"


def batch_pairs(paths: Iterable[PathLike], out_dir: PathLike) -> List[Tuple[Path, Path]]:
    """``(input, output)`` for every model the inputs name."""
    out = Path(out_dir)
    pairs = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            for model in sorted(path.rglob("*.onnx")):
                if model.is_file():
                    pairs.append((model, out / model.relative_to(path)))
        else:
            pairs.append((path, out / path.name))
    return pairs


def convert_many(
    paths: Iterable[PathLike],
    out_dir: PathLike,
    jobs: Optional[int] = None,
    value_info: bool = True,
) -> Iterator[ConvertResult]:
    """Converts every model ``paths`` names into ``out_dir`` on ``jobs``
    threads (default: one per core), yielding a :class:`ConvertResult` per
    model as each finishes. A model that fails does not stop the batch."""
    if jobs is not None and jobs < 1:
        raise ValueError("jobs must be at least 1")
    pairs = batch_pairs(paths, out_dir)
    workers = jobs or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=workers) as pool:
        try:
            pending = {
                pool.submit(_native.convert_file, os.fspath(i), os.fspath(o), value_info): (i, o) for i, o in pairs
            }
            for done in as_completed(pending):
                source, target = pending[done]
                status, message, checked = done.result()
                report = Report._from_native(checked) if checked is not None else None
                yield ConvertResult(source, target, status, message, report)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
