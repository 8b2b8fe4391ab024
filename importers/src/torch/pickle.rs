//! A reader for the protocol-2 pickles TorchScript archives hold.
