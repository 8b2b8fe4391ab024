//! Declared value types, as a model states them (`TypeProto`).
//!
//! These are claims read from a file, not inference results: every part may be
//! missing, and presence is kept exactly so that re-export reproduces the file.

use crate::elem_type::ElemType;

/// A declared type, with its optional denotation (`IMAGE`, `TEXT`, ...).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct TypeInfo {
    /// Which kind of type, or `None` when the file leaves it unset.
    pub value: Option<TypeValue>,
    /// The type's denotation string.
    pub denotation: Option<String>,
}

/// The kinds of value an ONNX graph carries.
#[derive(Clone, Debug, PartialEq)]
pub enum TypeValue {
    /// A dense tensor.
    Tensor {
        /// Element type.
        elem: Option<ElemType>,
        /// Shape; `None` means the rank is unknown too.
        shape: Option<TensorShape>,
    },
    /// A sequence of values of one type.
    Sequence(Option<Box<TypeInfo>>),
    /// A map from a scalar key type to values of one type.
    Map {
        /// Key element type.
        key: Option<ElemType>,
        /// Value type.
        value: Option<Box<TypeInfo>>,
    },
    /// A value that may be absent.
    Optional(Option<Box<TypeInfo>>),
    /// A sparse tensor.
    SparseTensor {
        /// Element type.
        elem: Option<ElemType>,
        /// Shape; `None` means the rank is unknown too.
        shape: Option<TensorShape>,
    },
    /// A type known only by name.
    Opaque {
        /// Its domain.
        domain: Option<String>,
        /// Its name.
        name: Option<String>,
    },
}

/// A declared tensor shape: one entry per axis.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct TensorShape {
    /// The axes, outermost first.
    pub dims: Vec<DimDecl>,
}

/// One declared axis.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct DimDecl {
    /// Its size: a number, a symbol, or nothing.
    pub value: Option<DimValue>,
    /// The axis denotation (`DATA_BATCH`, `DATA_CHANNEL`, ...), which the solver reads as a basis.
    pub denotation: Option<String>,
}

/// A declared size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DimValue {
    /// A fixed size (`dim_value`). Kept as stated, even when negative.
    Known(i64),
    /// A symbolic size (`dim_param`), fixed at run time.
    Param(String),
}

impl TypeInfo {
    /// The element type and shape when this declares a dense tensor.
    pub fn as_tensor(&self) -> Option<(Option<ElemType>, Option<&TensorShape>)> {
        match &self.value {
            Some(TypeValue::Tensor { elem, shape }) => Some((*elem, shape.as_ref())),
            _ => None,
        }
    }

    /// A compact, human-readable rendering: `float[batch,3,224,224]`,
    /// `seq(float[?])`, `map(int64, float[])`.
    pub fn summary(&self) -> String {
        match &self.value {
            None => "?".to_string(),
            Some(TypeValue::Tensor { elem, shape }) => tensor_summary(*elem, shape.as_ref()),
            Some(TypeValue::SparseTensor { elem, shape }) => {
                format!("sparse({})", tensor_summary(*elem, shape.as_ref()))
            }
            Some(TypeValue::Sequence(inner)) => format!("seq({})", boxed_summary(inner)),
            Some(TypeValue::Optional(inner)) => format!("optional({})", boxed_summary(inner)),
            Some(TypeValue::Map { key, value }) => {
                format!("map({}, {})", elem_summary(*key), boxed_summary(value))
            }
            Some(TypeValue::Opaque { domain, name }) => {
                format!("opaque({}.{})", domain.as_deref().unwrap_or(""), name.as_deref().unwrap_or(""))
            }
        }
    }
}

fn boxed_summary(inner: &Option<Box<TypeInfo>>) -> String {
    inner.as_ref().map_or_else(|| "?".to_string(), |t| t.summary())
}

fn elem_summary(elem: Option<ElemType>) -> String {
    elem.map_or_else(|| "?".to_string(), |e| e.to_string())
}

fn tensor_summary(elem: Option<ElemType>, shape: Option<&TensorShape>) -> String {
    match shape {
        None => format!("{}[..]", elem_summary(elem)),
        Some(shape) => format!("{}[{}]", elem_summary(elem), shape),
    }
}

impl std::fmt::Display for TensorShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, dim) in self.dims.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match &dim.value {
                Some(DimValue::Known(n)) => write!(f, "{n}")?,
                Some(DimValue::Param(p)) => f.write_str(p)?,
                None => f.write_str("?")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dim(value: Option<DimValue>) -> DimDecl {
        DimDecl { value, denotation: None }
    }

    #[test]
    fn summaries_show_symbols_unknowns_and_nesting() {
        let shape = TensorShape {
            dims: vec![dim(Some(DimValue::Param("batch".into()))), dim(Some(DimValue::Known(3))), dim(None)],
        };
        let tensor = TypeInfo {
            value: Some(TypeValue::Tensor { elem: Some(ElemType::Float), shape: Some(shape) }),
            denotation: None,
        };
        assert_eq!(tensor.summary(), "float[batch,3,?]");
        let seq = TypeInfo { value: Some(TypeValue::Sequence(Some(Box::new(tensor)))), denotation: None };
        assert_eq!(seq.summary(), "seq(float[batch,3,?])");
        let unranked =
            TypeInfo { value: Some(TypeValue::Tensor { elem: Some(ElemType::Int64), shape: None }), denotation: None };
        assert_eq!(unranked.summary(), "int64[..]");
    }
}
