//! Element types of tensors, with the ONNX `TensorProto.DataType` codes.
//!
//! A code this version does not know is kept as [`ElemType::Unknown`] so that a
//! model from a newer producer still round-trips unchanged.

use std::fmt;

macro_rules! elem_types {
    ($($variant:ident = $code:literal, $name:literal, $bits:literal;)*) => {
        /// A tensor element type.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ElemType {
            $(
                #[doc = concat!("`", $name, "` (code ", stringify!($code), ")")]
                $variant,
            )*
            /// A code outside the known table, kept verbatim.
            Unknown(i32),
        }

        impl ElemType {
            /// The type with ONNX code `code`.
            pub fn from_code(code: i32) -> ElemType {
                match code {
                    $($code => ElemType::$variant,)*
                    other => ElemType::Unknown(other),
                }
            }

            /// The ONNX code.
            pub fn code(self) -> i32 {
                match self {
                    $(ElemType::$variant => $code,)*
                    ElemType::Unknown(code) => code,
                }
            }

            /// The lower-case name used in ONNX type strings (`float`, `int64`).
            pub fn name(self) -> &'static str {
                match self {
                    $(ElemType::$variant => $name,)*
                    ElemType::Unknown(_) => "unknown",
                }
            }

            /// Bits per element in `raw_data`; `None` for strings and unknown codes.
            pub fn bit_width(self) -> Option<u32> {
                match self {
                    $(ElemType::$variant => if $bits == 0 { None } else { Some($bits) },)*
                    ElemType::Unknown(_) => None,
                }
            }
        }
    };
}

elem_types! {
    Undefined = 0, "undefined", 0;
    Float = 1, "float", 32;
    Uint8 = 2, "uint8", 8;
    Int8 = 3, "int8", 8;
    Uint16 = 4, "uint16", 16;
    Int16 = 5, "int16", 16;
    Int32 = 6, "int32", 32;
    Int64 = 7, "int64", 64;
    String = 8, "string", 0;
    Bool = 9, "bool", 8;
    Float16 = 10, "float16", 16;
    Double = 11, "double", 64;
    Uint32 = 12, "uint32", 32;
    Uint64 = 13, "uint64", 64;
    Complex64 = 14, "complex64", 64;
    Complex128 = 15, "complex128", 128;
    Bfloat16 = 16, "bfloat16", 16;
    Float8e4m3fn = 17, "float8e4m3fn", 8;
    Float8e4m3fnuz = 18, "float8e4m3fnuz", 8;
    Float8e5m2 = 19, "float8e5m2", 8;
    Float8e5m2fnuz = 20, "float8e5m2fnuz", 8;
    Uint4 = 21, "uint4", 4;
    Int4 = 22, "int4", 4;
    Float4e2m1 = 23, "float4e2m1", 4;
    Float8e8m0 = 24, "float8e8m0", 8;
    Uint2 = 25, "uint2", 2;
    Int2 = 26, "int2", 2;
}

impl ElemType {
    /// Bytes that `count` elements take in `raw_data` (sub-byte types are
    /// packed, rounded up to whole bytes); `None` for strings, unknown codes,
    /// or a size that overflows `u64`.
    pub fn raw_size(self, count: u64) -> Option<u64> {
        let bits = u64::from(self.bit_width()?);
        Some(count.checked_mul(bits)?.div_ceil(8))
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ElemType::Unknown(code) => write!(f, "unknown({code})"),
            known => f.write_str(known.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_including_unknown_ones() {
        for code in -1..40 {
            assert_eq!(ElemType::from_code(code).code(), code);
        }
        assert_eq!(ElemType::from_code(7), ElemType::Int64);
        assert_eq!(ElemType::from_code(99).to_string(), "unknown(99)");
    }

    #[test]
    fn raw_sizes_pack_sub_byte_types() {
        assert_eq!(ElemType::Float.raw_size(3), Some(12));
        assert_eq!(ElemType::Int4.raw_size(3), Some(2));
        assert_eq!(ElemType::Uint2.raw_size(5), Some(2));
        assert_eq!(ElemType::String.raw_size(3), None);
        assert_eq!(ElemType::Complex128.raw_size(u64::MAX), None);
    }
}
