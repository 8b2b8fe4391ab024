//! Node attributes.
//!
//! An ONNX attribute names its kind in `type` and stores its value in one of
//! fourteen fields. The IR keeps all fields — a file may (wrongly) fill several,
//! and re-export must not drop any — and offers [`Attribute::value`], the typed
//! view the rest of diamond reads. Subgraphs are [`GraphId`]s into the model's
//! graph arena.

use crate::entity::GraphId;
use crate::tensor::{SparseTensor, Tensor};
use crate::types::TypeInfo;
use bytes::Bytes;

/// The kind an attribute declares (`AttributeProto.AttributeType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum AttrType {
    Undefined,
    Float,
    Int,
    String,
    Tensor,
    Graph,
    SparseTensor,
    TypeProto,
    Floats,
    Ints,
    Strings,
    Tensors,
    Graphs,
    SparseTensors,
    TypeProtos,
    /// A code this version does not know, kept verbatim.
    Unknown(i32),
}

impl AttrType {
    /// The kind with ONNX code `code`.
    pub fn from_code(code: i32) -> AttrType {
        use AttrType::*;
        match code {
            0 => Undefined,
            1 => Float,
            2 => Int,
            3 => String,
            4 => Tensor,
            5 => Graph,
            6 => Floats,
            7 => Ints,
            8 => Strings,
            9 => Tensors,
            10 => Graphs,
            11 => SparseTensor,
            12 => SparseTensors,
            13 => TypeProto,
            14 => TypeProtos,
            other => Unknown(other),
        }
    }

    /// The ONNX code.
    pub fn code(self) -> i32 {
        use AttrType::*;
        match self {
            Undefined => 0,
            Float => 1,
            Int => 2,
            String => 3,
            Tensor => 4,
            Graph => 5,
            Floats => 6,
            Ints => 7,
            Strings => 8,
            Tensors => 9,
            Graphs => 10,
            SparseTensor => 11,
            SparseTensors => 12,
            TypeProto => 13,
            TypeProtos => 14,
            Unknown(code) => code,
        }
    }
}

/// One attribute, field for field. The fields few attributes fill sit
/// apart, boxed, in [`AttrRare`]: a graph holds an attribute for every
/// setting of every node, nearly all of them one number, list or tensor.
#[derive(Clone, Debug, PartialEq, Default)]
#[allow(missing_docs)]
pub struct Attribute {
    pub name: Option<String>,
    /// Inside a function body: the caller's attribute this one stands for.
    pub ref_attr_name: Option<String>,
    /// The declared kind.
    pub attr_type: Option<AttrType>,
    pub f: Option<f32>,
    pub i: Option<i64>,
    pub s: Option<Bytes>,
    /// Boxed: a tensor is large and few attributes hold one.
    pub t: Option<Box<Tensor>>,
    pub g: Option<GraphId>,
    pub floats: Vec<f32>,
    pub ints: Vec<i64>,
    /// The rarely filled fields; `None` when all of them are empty (build it
    /// with [`AttrRare::boxed`] so that equal attributes compare equal).
    pub rare: Option<Box<AttrRare>>,
}

/// The fields of an attribute that few files fill.
#[derive(Clone, Debug, PartialEq, Default)]
#[allow(missing_docs)]
pub struct AttrRare {
    pub doc_string: Option<String>,
    pub sparse_tensor: Option<Box<SparseTensor>>,
    pub tp: Option<TypeInfo>,
    pub strings: Vec<Bytes>,
    pub tensors: Vec<Tensor>,
    pub graphs: Vec<GraphId>,
    pub sparse_tensors: Vec<SparseTensor>,
    pub type_protos: Vec<TypeInfo>,
}

/// What [`Attribute::rare`] lends when an attribute has no rare field.
static NO_RARE: AttrRare = AttrRare {
    doc_string: None,
    sparse_tensor: None,
    tp: None,
    strings: Vec::new(),
    tensors: Vec::new(),
    graphs: Vec::new(),
    sparse_tensors: Vec::new(),
    type_protos: Vec::new(),
};

impl AttrRare {
    /// Boxed, or `None` when every field is empty.
    pub fn boxed(self) -> Option<Box<AttrRare>> {
        (self != NO_RARE).then(|| Box::new(self))
    }
}

/// The value of an attribute, as its declared kind selects it.
#[derive(Clone, Copy, Debug, PartialEq)]
#[allow(missing_docs)]
pub enum AttrValue<'a> {
    Float(f32),
    Int(i64),
    String(&'a [u8]),
    Tensor(&'a Tensor),
    Graph(GraphId),
    SparseTensor(&'a SparseTensor),
    Type(&'a TypeInfo),
    Floats(&'a [f32]),
    Ints(&'a [i64]),
    Strings(&'a [Bytes]),
    Tensors(&'a [Tensor]),
    Graphs(&'a [GraphId]),
    SparseTensors(&'a [SparseTensor]),
    Types(&'a [TypeInfo]),
}

impl Attribute {
    /// The attribute's name, `""` when unset.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }

    /// The value its declared kind selects; `None` when the kind is missing or
    /// unknown, or the selected field is unset (a reference attribute has none).
    pub fn value(&self) -> Option<AttrValue<'_>> {
        use AttrType as T;
        Some(match self.attr_type? {
            T::Float => AttrValue::Float(self.f?),
            T::Int => AttrValue::Int(self.i?),
            T::String => AttrValue::String(self.s.as_deref()?),
            T::Tensor => AttrValue::Tensor(self.t.as_deref()?),
            T::Graph => AttrValue::Graph(self.g?),
            T::SparseTensor => AttrValue::SparseTensor(self.rare().sparse_tensor.as_deref()?),
            T::TypeProto => AttrValue::Type(self.rare().tp.as_ref()?),
            T::Floats => AttrValue::Floats(&self.floats),
            T::Ints => AttrValue::Ints(&self.ints),
            T::Strings => AttrValue::Strings(&self.rare().strings),
            T::Tensors => AttrValue::Tensors(&self.rare().tensors),
            T::Graphs => AttrValue::Graphs(&self.rare().graphs),
            T::SparseTensors => AttrValue::SparseTensors(&self.rare().sparse_tensors),
            T::TypeProtos => AttrValue::Types(&self.rare().type_protos),
            T::Undefined | T::Unknown(_) => return None,
        })
    }

    /// Every subgraph this attribute holds, in field order.
    pub fn subgraphs(&self) -> impl Iterator<Item = GraphId> + '_ {
        self.g.into_iter().chain(self.rare().graphs.iter().copied())
    }

    /// The rarely filled fields, all empty when the attribute has none.
    pub fn rare(&self) -> &AttrRare {
        self.rare.as_deref().unwrap_or(&NO_RARE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_follows_the_declared_kind() {
        let attr = Attribute {
            name: Some("axis".into()),
            attr_type: Some(AttrType::Int),
            i: Some(-1),
            f: Some(2.0),
            ..Attribute::default()
        };
        assert_eq!(attr.value(), Some(AttrValue::Int(-1)));
        let reference =
            Attribute { attr_type: Some(AttrType::Float), ref_attr_name: Some("alpha".into()), ..Attribute::default() };
        assert_eq!(reference.value(), None);
        for code in 0..16 {
            assert_eq!(AttrType::from_code(code).code(), code);
        }
    }
}
