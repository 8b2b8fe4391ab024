//! What a TorchScript archive's pickles mean: objects of TorchScript classes
//! (the module tree), tensors stored in the archive, and plain values.

use diamond_ir::ElemType;

/// A value from `data.pkl`, `constants.pkl` or `traced_inputs.pkl`.
#[derive(Clone, Debug, PartialEq)]
pub enum TsValue {
    /// `None`.
    None,
    /// A bool.
    Bool(bool),
    /// An int.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
    /// A tuple.
    Tuple(Vec<TsValue>),
    /// A list.
    List(Vec<TsValue>),
    /// A dict, entries in order.
    Dict(Vec<(TsValue, TsValue)>),
    /// A tensor whose data is a storage of the archive.
    Tensor(StoredTensor),
    /// An object of a TorchScript class (a module, or a scripted class).
    Object(TsObject),
}

/// An object of a TorchScript class: its qualified class name
/// (`__torch__.torch.nn.modules.conv.Conv2d`) and attributes in order.
#[derive(Clone, Debug, PartialEq)]
pub struct TsObject {
    /// The qualified class name.
    pub class: String,
    /// Attribute name → value, in the pickle's order.
    pub attrs: Vec<(String, TsValue)>,
}

impl TsObject {
    /// The attribute `name`.
    pub fn attr(&self, name: &str) -> Option<&TsValue> {
        self.attrs.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

/// A tensor view of one storage: `torch._utils._rebuild_tensor_v2(storage,
/// offset, size, stride, requires_grad, ...)` with the storage a persistent
/// id `('storage', <Type>Storage, key, device, numel)`.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredTensor {
    /// The storage's key: the entry `data/<key>` (or `constants/<key>` in constants.pkl).
    pub key: String,
    /// Whether it lives under `constants/` rather than `data/`.
    pub constant: bool,
    /// The element type of the storage (`FloatStorage` → Float, ...).
    pub elem: ElemType,
    /// Elements in the storage (the persistent id's `numel`).
    pub storage_numel: u64,
    /// Offset of the first element, in elements.
    pub offset: u64,
    /// Sizes.
    pub sizes: Vec<u64>,
    /// Strides, in elements.
    pub strides: Vec<u64>,
}
