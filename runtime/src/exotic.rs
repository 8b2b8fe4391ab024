//! The small element types: 8-bit floats (E4M3FN, E4M3FNUZ, E5M2,
//! E5M2FNUZ), the 4-bit float E2M1, and 4- and 2-bit integers. Each is a
//! newtype over its code; values convert through `f64`.
//!
//! Float encoding rounds to nearest, ties to even. Past the largest finite
//! value it saturates (the `Cast` default); [`encode_float`] with
//! `saturate = false` gives infinity where the format has one, NaN
//! otherwise. Integer conversion truncates toward zero and wraps to the
//! width, as ONNX's reference (ml_dtypes) does; quantization clips first.

use crate::tensor::{Data, Elem, Scalar};
use diamond_ir::ElemType;
use std::cmp::Ordering;

/// How a small float format spends its special codes.
#[derive(Clone, Copy, PartialEq)]
enum Special {
    /// IEEE-like: the top exponent is infinity (mantissa 0) or NaN.
    Ieee,
    /// Only the all-ones code (either sign) is NaN; no infinity.
    Fn,
    /// Negative zero's code is the only NaN; no infinity, no -0.
    Fnuz,
    /// Every code is finite.
    None,
}

#[derive(Clone, Copy)]
struct Format {
    exp: u32,
    man: u32,
    bias: i32,
    special: Special,
}

const E4M3FN: Format = Format { exp: 4, man: 3, bias: 7, special: Special::Fn };
const E4M3FNUZ: Format = Format { exp: 4, man: 3, bias: 8, special: Special::Fnuz };
const E5M2: Format = Format { exp: 5, man: 2, bias: 15, special: Special::Ieee };
const E5M2FNUZ: Format = Format { exp: 5, man: 2, bias: 16, special: Special::Fnuz };
const E2M1: Format = Format { exp: 2, man: 1, bias: 1, special: Special::None };

fn decode(f: Format, code: u8) -> f64 {
    let bits = f.exp + f.man;
    let sign = (code >> bits) & 1;
    let e = ((code >> f.man) & ((1 << f.exp) - 1)) as i32;
    let m = (code & ((1 << f.man) - 1)) as i32;
    let top_e = (1 << f.exp) - 1;
    let top_m = (1 << f.man) - 1;
    match f.special {
        Special::Fnuz if sign == 1 && e == 0 && m == 0 => return f64::NAN,
        Special::Fn if e == top_e && m == top_m => return f64::NAN,
        Special::Ieee if e == top_e => {
            return if m == 0 {
                if sign == 1 {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                }
            } else {
                f64::NAN
            }
        }
        _ => {}
    }
    let frac = f64::from(m) / f64::from(1 << f.man);
    let v = if e == 0 { frac * 2f64.powi(1 - f.bias) } else { (1.0 + frac) * 2f64.powi(e - f.bias) };
    if sign == 1 {
        -v
    } else {
        v
    }
}

/// The code of `x` in format `f`.
fn encode(f: Format, x: f64, saturate: bool) -> u8 {
    let bits = f.exp + f.man;
    let sign_bit: u8 = 1 << bits;
    let nan = match f.special {
        Special::Fnuz => sign_bit,
        Special::Fn | Special::Ieee => sign_bit - 1,
        Special::None => 0,
    };
    if x.is_nan() {
        return nan;
    }
    // the non-negative finite codes, in increasing value
    let finite: Vec<(f64, u8)> = (0..sign_bit).map(|c| (decode(f, c), c)).filter(|(v, _)| v.is_finite()).collect();
    let (max, max_code) = finite[finite.len() - 1];
    let prev = finite[finite.len() - 2].0;
    let a = x.abs();
    // halfway to the next (unrepresentable) value, ties go to the even code
    let mid = max + (max - prev) / 2.0;
    let overflow = a.is_infinite() || a > mid || (a == mid && max_code % 2 == 1);
    let magnitude = if overflow {
        if saturate || f.special == Special::None {
            max_code
        } else if f.special == Special::Ieee {
            max_code + 1 // the infinity code follows the largest finite one
        } else {
            return nan;
        }
    } else {
        let mut best = finite[0];
        for &(v, c) in &finite {
            let d = (v - a).abs();
            let bd = (best.0 - a).abs();
            match d.partial_cmp(&bd) {
                Some(Ordering::Less) => best = (v, c),
                Some(Ordering::Equal) if c % 2 == 0 && best.1 % 2 == 1 => best = (v, c),
                _ => {}
            }
        }
        best.1
    };
    if x.is_sign_negative() && !(f.special == Special::Fnuz && magnitude == 0) {
        magnitude | sign_bit
    } else {
        magnitude
    }
}

/// `x` in the small float `elem` without saturation; `None` for other types.
pub fn encode_float(elem: ElemType, x: f64, saturate: bool) -> Option<u8> {
    let f = match elem {
        ElemType::Float8e4m3fn => E4M3FN,
        ElemType::Float8e4m3fnuz => E4M3FNUZ,
        ElemType::Float8e5m2 => E5M2,
        ElemType::Float8e5m2fnuz => E5M2FNUZ,
        ElemType::Float4e2m1 => E2M1,
        _ => return None,
    };
    Some(encode(f, x, saturate))
}

/// Codes of the small float `elem` as data; `None` for other types.
pub fn float_codes(elem: ElemType, codes: Vec<u8>) -> Option<Data> {
    Some(match elem {
        ElemType::Float8e4m3fn => Data::F8E4M3FN(codes.into_iter().map(F8E4M3FN).collect()),
        ElemType::Float8e4m3fnuz => Data::F8E4M3FNUZ(codes.into_iter().map(F8E4M3FNUZ).collect()),
        ElemType::Float8e5m2 => Data::F8E5M2(codes.into_iter().map(F8E5M2).collect()),
        ElemType::Float8e5m2fnuz => Data::F8E5M2FNUZ(codes.into_iter().map(F8E5M2FNUZ).collect()),
        ElemType::Float4e2m1 => Data::F4E2M1(codes.into_iter().map(F4E2M1).collect()),
        _ => return None,
    })
}

macro_rules! small_float {
    ($name:ident, $variant:ident, $elem:ident, $fmt:expr) => {
        #[doc = concat!("A `", stringify!($elem), "` code.")]
        #[derive(Clone, Copy, Debug, PartialEq, Default)]
        pub struct $name(pub u8);

        impl PartialOrd for $name {
            fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
                self.to_f64().partial_cmp(&other.to_f64())
            }
        }

        impl Elem for $name {
            fn wrap(v: Vec<Self>) -> Data {
                Data::$variant(v)
            }
        }

        impl Scalar for $name {
            const ELEM: ElemType = ElemType::$elem;
            const FLOAT: bool = true;
            fn to_f64(self) -> f64 {
                decode($fmt, self.0)
            }
            fn from_f64(x: f64) -> Self {
                $name(encode($fmt, x, true))
            }
            fn to_i128(self) -> i128 {
                self.to_f64() as i128
            }
            fn from_i128(x: i128) -> Self {
                Self::from_f64(x as f64)
            }
        }
    };
}

small_float!(F8E4M3FN, F8E4M3FN, Float8e4m3fn, E4M3FN);
small_float!(F8E4M3FNUZ, F8E4M3FNUZ, Float8e4m3fnuz, E4M3FNUZ);
small_float!(F8E5M2, F8E5M2, Float8e5m2, E5M2);
small_float!(F8E5M2FNUZ, F8E5M2FNUZ, Float8e5m2fnuz, E5M2FNUZ);
small_float!(F4E2M1, F4E2M1, Float4e2m1, E2M1);

/// An `float8e8m0` code: the power of two 2^(code − 127); 255 is NaN.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct F8E8M0(pub u8);

impl F8E8M0 {
    /// The code of `x` rounded `up`, `down` or to the `nearest` power of two
    /// (ties up); past the range it saturates, or is NaN without `saturate`.
    pub fn encode(x: f64, mode: &str, saturate: bool) -> u8 {
        if x.is_nan() || x < 0.0 {
            return 255;
        }
        if x.is_infinite() {
            return if saturate { 254 } else { 255 };
        }
        if x <= 2f64.powi(-127) {
            return 0;
        }
        let e = x.log2();
        let code = match mode {
            "down" => e.floor(),
            "nearest" => {
                let lo = 2f64.powf(e.floor());
                if x - lo < 2.0 * lo - x {
                    e.floor()
                } else {
                    e.floor() + 1.0
                }
            }
            _ => e.ceil(),
        } + 127.0;
        if code > 254.0 {
            if saturate {
                254
            } else {
                255
            }
        } else {
            code.max(0.0) as u8
        }
    }
}

impl PartialOrd for F8E8M0 {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        self.to_f64().partial_cmp(&other.to_f64())
    }
}

impl Elem for F8E8M0 {
    fn wrap(v: Vec<Self>) -> Data {
        Data::F8E8M0(v)
    }
}

impl Scalar for F8E8M0 {
    const ELEM: ElemType = ElemType::Float8e8m0;
    const FLOAT: bool = true;
    fn to_f64(self) -> f64 {
        if self.0 == 255 {
            f64::NAN
        } else {
            2f64.powi(i32::from(self.0) - 127)
        }
    }
    fn from_f64(x: f64) -> Self {
        F8E8M0(F8E8M0::encode(x, "up", true))
    }
    fn to_i128(self) -> i128 {
        self.to_f64() as i128
    }
    fn from_i128(x: i128) -> Self {
        Self::from_f64(x as f64)
    }
}

macro_rules! small_int {
    ($name:ident, $variant:ident, $elem:ident, $repr:ty, $min:expr, $max:expr) => {
        #[doc = concat!("An `", stringify!($elem), "` value.")]
        #[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Default)]
        pub struct $name(pub $repr);

        impl Elem for $name {
            fn wrap(v: Vec<Self>) -> Data {
                Data::$variant(v)
            }
        }

        impl Scalar for $name {
            const ELEM: ElemType = ElemType::$elem;
            const FLOAT: bool = false;
            fn to_f64(self) -> f64 {
                f64::from(self.0)
            }
            fn from_f64(x: f64) -> Self {
                if x.is_nan() {
                    return $name(0);
                }
                Self::from_i128(x as i128)
            }
            fn to_i128(self) -> i128 {
                i128::from(self.0)
            }
            fn from_i128(x: i128) -> Self {
                // wrap to the width, like every integer conversion
                let span: i128 = $max - $min + 1;
                $name((x - $min).rem_euclid(span) as $repr + $min as $repr)
            }
        }
    };
}

small_int!(I4, I4, Int4, i8, -8, 7);
small_int!(U4, U4, Uint4, u8, 0, 15);
small_int!(I2, I2, Int2, i8, -2, 1);
small_int!(U2, U2, Uint2, u8, 0, 3);

/// Whether `elem` is one of the types of this module.
pub fn is_small(elem: ElemType) -> bool {
    matches!(
        elem,
        ElemType::Float8e8m0
            | ElemType::Float8e4m3fn
            | ElemType::Float8e4m3fnuz
            | ElemType::Float8e5m2
            | ElemType::Float8e5m2fnuz
            | ElemType::Float4e2m1
            | ElemType::Int4
            | ElemType::Uint4
            | ElemType::Int2
            | ElemType::Uint2
    )
}

/// Unpacks `count` elements of `bits` (4 or 2) bits each, lowest bits first,
/// sign-extending when `signed`.
pub fn unpack(bytes: &[u8], count: usize, bits: u32, signed: bool) -> Vec<i8> {
    let per = (8 / bits) as usize;
    let mask = (1u8 << bits) - 1;
    (0..count)
        .map(|i| {
            let v = (bytes[i / per] >> ((i % per) as u32 * bits)) & mask;
            if signed && v >> (bits - 1) == 1 {
                (v as i8) - (1 << bits)
            } else {
                v as i8
            }
        })
        .collect()
}

/// Decodes raw little-endian data of a small type; `None` for other types.
pub fn decode_raw(elem: ElemType, raw: &[u8], count: usize) -> Option<Result<Data, String>> {
    if !is_small(elem) {
        return None;
    }
    let need = elem.raw_size(count as u64)? as usize;
    if raw.len() != need {
        return Some(Err(format!("raw_data has {} bytes, {count} elements of {elem} need {need}", raw.len())));
    }
    Some(Ok(match elem {
        ElemType::Float8e4m3fn => Data::F8E4M3FN(raw.iter().map(|&b| F8E4M3FN(b)).collect()),
        ElemType::Float8e4m3fnuz => Data::F8E4M3FNUZ(raw.iter().map(|&b| F8E4M3FNUZ(b)).collect()),
        ElemType::Float8e5m2 => Data::F8E5M2(raw.iter().map(|&b| F8E5M2(b)).collect()),
        ElemType::Float8e5m2fnuz => Data::F8E5M2FNUZ(raw.iter().map(|&b| F8E5M2FNUZ(b)).collect()),
        ElemType::Float8e8m0 => Data::F8E8M0(raw.iter().map(|&b| F8E8M0(b)).collect()),
        ElemType::Float4e2m1 => {
            Data::F4E2M1(unpack(raw, count, 4, false).into_iter().map(|v| F4E2M1(v as u8)).collect())
        }
        ElemType::Int4 => Data::I4(unpack(raw, count, 4, true).into_iter().map(I4).collect()),
        ElemType::Uint4 => Data::U4(unpack(raw, count, 4, false).into_iter().map(|v| U4(v as u8)).collect()),
        ElemType::Int2 => Data::I2(unpack(raw, count, 2, true).into_iter().map(I2).collect()),
        ElemType::Uint2 => Data::U2(unpack(raw, count, 2, false).into_iter().map(|v| U2(v as u8)).collect()),
        _ => return None,
    }))
}

/// Decodes `int32_data` of a small type (float8: one code per entry; 4- and
/// 2-bit types: packed bytes, one per entry); `None` for other types.
pub fn decode_int32s(elem: ElemType, v: &[i32], count: usize) -> Option<Result<Data, String>> {
    if !is_small(elem) {
        return None;
    }
    let bytes: Vec<u8> = v.iter().map(|&x| x as u8).collect();
    match elem {
        ElemType::Float8e4m3fn
        | ElemType::Float8e4m3fnuz
        | ElemType::Float8e5m2
        | ElemType::Float8e5m2fnuz
        | ElemType::Float8e8m0 => {
            if bytes.len() != count {
                return Some(Err(format!("{} codes for {count} elements", bytes.len())));
            }
            decode_raw(elem, &bytes, count)
        }
        _ => decode_raw(elem, &bytes, count),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float8_codes_round_trip_and_saturate() {
        assert_eq!(decode(E4M3FN, 0x7E), 448.0);
        assert!(decode(E4M3FN, 0x7F).is_nan());
        assert_eq!(decode(E5M2, 0x7B), 57344.0);
        assert_eq!(decode(E5M2, 0x7C), f64::INFINITY);
        assert!(decode(E4M3FNUZ, 0x80).is_nan());
        assert_eq!(decode(E2M1, 0x7), 6.0);
        for c in 0..=255u8 {
            let v = decode(E4M3FN, c);
            if v.is_finite() && !(v == 0.0 && c == 0x80) {
                assert_eq!(encode(E4M3FN, v, true), c, "code {c:#x}");
            }
        }
        assert_eq!(encode(E4M3FN, 1e6, true), 0x7E);
        assert_eq!(encode(E4M3FN, 1e6, false), 0x7F);
        assert_eq!(encode(E5M2, 1e6, false), 0x7C);
        assert_eq!(encode(E4M3FN, 460.0, false), 0x7E, "below the midpoint rounds to the maximum");
        assert_eq!(I4::from_f64(-9.0).0, 7);
        assert_eq!(I4::from_f64(8.0).0, -8);
        assert_eq!(U2::from_f64(-3.0).0, 1);
        assert_eq!(unpack(&[0xF1], 2, 4, true), vec![1, -1]);
    }
}
