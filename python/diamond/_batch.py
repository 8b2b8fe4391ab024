"""``convert_many``: a batch of models converted on worker threads (each
conversion releases the GIL) or on any ``concurrent.futures.Executor`` —
processes, or a cluster's workers (Dask's ``client.get_executor()``, Ray,
``mpi4py.futures``) — the results yielded as they finish.

Inputs are files or directories (searched recursively for ``*.onnx``); the
outputs mirror them under ``out_dir`` as ``diamond convert`` does: a file
is written as ``out_dir/NAME``, a directory's models at their path relative
to it.
"""

from __future__ import annotations

import os
from concurrent.futures import Executor, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union

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


def convert_one(input: str, output: str, value_info: bool = True) -> Tuple[str, Optional[str], Optional[Dict[str, Any]]]:
    """Converts one model of a batch where it is called (a worker thread,
    process or machine): ``(status, message, report)`` with the report as
    plain data, so that it travels back from another process."""
    status, message, checked = _native.convert_file(input, output, value_info)
    report = None if checked is None else {"document": checked.document(), "assumptions": checked.assumption_indices()}
    return status, message, report


def convert_many(
    paths: Iterable[PathLike],
    out_dir: PathLike,
    jobs: Optional[int] = None,
    value_info: bool = True,
    executor: Optional[Executor] = None,
) -> Iterator[ConvertResult]:
    """Converts every model ``paths`` names into ``out_dir``, yielding a
    :class:`ConvertResult` per model as each finishes. A model that fails
    does not stop the batch.

    By default the models convert on ``jobs`` threads of this process (one
    per core when ``None``). With ``executor`` — any
    ``concurrent.futures.Executor``: a ``ProcessPoolExecutor``, Dask's
    ``client.get_executor()``, Ray's or ``mpi4py``'s — each model is one
    task submitted to it (the workers need ``diamond`` installed and the
    paths readable and writable where they run); ``jobs`` is then unused
    and the executor is left running.
    """
    if jobs is not None and jobs < 1:
        raise ValueError("jobs must be at least 1")
    pairs = batch_pairs(paths, out_dir)
    if executor is not None:
        yield from _collect(executor, pairs, value_info, convert_one, detached=True)
        return
    workers = jobs or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=workers) as pool:
        try:
            yield from _collect(pool, pairs, value_info, _native.convert_file, detached=False)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def _collect(executor: Executor, pairs: List[Tuple[Path, Path]], value_info: bool, task: Any, detached: bool) -> Iterator[ConvertResult]:
    """Submits ``task`` per pair to ``executor`` and yields the results as they finish."""
    pending = {executor.submit(task, os.fspath(i), os.fspath(o), value_info): (i, o) for i, o in pairs}
    try:
        for done in as_completed(pending):
            source, target = pending[done]
            status, message, checked = done.result()
            if checked is None:
                report = None
            elif detached:
                report = Report._from_document(checked["document"], checked["assumptions"])
            else:
                report = Report._from_native(checked)
            yield ConvertResult(source, target, status, message, report)
    finally:
        for future in pending:
            future.cancel()
