//! Tokens of the TorchScript Python subset, with indentation.
