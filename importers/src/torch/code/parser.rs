//! The TorchScript Python subset parsed into [`super::ast`].
