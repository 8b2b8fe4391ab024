//! TorchScript: `.pt` archives (`torch.jit.save` of a traced or scripted
//! module) and TorchScript IR text, read without libtorch or Python.
//!
//! - [`archive`]: the zip (root folder, entries, limits), its storages
//!   (memory-mapped where stored uncompressed) and the decoded pickles.
//! - [`pickle`]: a small reader for the protocol-2 pickles TorchScript writes.
//! - [`values`]: what the pickles mean — the module tree with its
//!   parameters as stored tensors, constants.
//! - [`code`]: the printed TorchScript source of each class (`code/**.py`),
//!   parsed into an AST.
//! - [`irtext`]: TorchScript IR text (`graph(%x : Float(...)): ...`).
//! - [`lower`]: running a module's `forward` (or an IR graph) into ONNX
//!   nodes, with submodules inlined and parameters as initializers.
//! - [`load`]: the entry points: a `.pt` file or an IR text file to a model.

pub mod archive;
pub mod code;
pub mod irtext;
pub mod load;
pub mod lower;
pub mod pickle;
pub mod values;
