//! TorchScript IR text (`str(traced.graph)`).
