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

/// The ONNX element type of a torch scalar type name, as storages
/// (`FloatStorage`) and IR text types (`Float(2, 3)`) spell it.
pub fn elem_of_torch_name(name: &str) -> Option<ElemType> {
    Some(match name {
        "Float" => ElemType::Float,
        "Double" => ElemType::Double,
        "Half" => ElemType::Float16,
        "BFloat16" => ElemType::Bfloat16,
        "Long" => ElemType::Int64,
        "Int" => ElemType::Int32,
        "Short" => ElemType::Int16,
        "Char" => ElemType::Int8,
        "Byte" => ElemType::Uint8,
        "Bool" => ElemType::Bool,
        "UInt16" => ElemType::Uint16,
        "UInt32" => ElemType::Uint32,
        "UInt64" => ElemType::Uint64,
        "ComplexFloat" => ElemType::Complex64,
        "ComplexDouble" => ElemType::Complex128,
        "Float8_e4m3fn" => ElemType::Float8e4m3fn,
        "Float8_e4m3fnuz" => ElemType::Float8e4m3fnuz,
        "Float8_e5m2" => ElemType::Float8e5m2,
        "Float8_e5m2fnuz" => ElemType::Float8e5m2fnuz,
        "Float8_e8m0fnu" => ElemType::Float8e8m0,
        _ => return None,
    })
}
