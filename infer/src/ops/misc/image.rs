//! `ImageDecoder`: an encoded image (a uint8 byte vector) to `[H, W, C]`
//! uint8, `C` being 3 for `RGB`/`BGR` and 1 for `Grayscale`. The height and
//! width come from the image's header when the bytes are known (PNG, BMP,
//! PNM, JPEG, JPEG 2000, TIFF, WebP); otherwise they are unknown.

use super::{set_tensor, unknown_shape};
use crate::rule::{Defer, OpCtx};
use diamond_ir::ElemType;

/// `ImageDecoder`: see the module documentation.
pub(super) fn image_decoder(ctx: &mut OpCtx) -> Result<(), Defer> {
    let t = Some(ElemType::Uint8);
    let format = ctx.attr_str("pixel_format").unwrap_or_else(|| "RGB".into());
    let channels = match format.as_str() {
        "RGB" | "BGR" => 3,
        "Grayscale" => 1,
        other => {
            ctx.invalid(format!("pixel_format '{other}' is not one of RGB, BGR, Grayscale"));
            unknown_shape(ctx, 0, t);
            return Ok(());
        }
    };
    let bytes: Option<Vec<u8>> = ctx.ints(0).and_then(|v| v.into_iter().map(|b| u8::try_from(b).ok()).collect());
    let (h, w) = match bytes.as_deref().and_then(image_size) {
        Some((h, w)) => (ctx.known(h), ctx.known(w)),
        None => (ctx.unknown_dim(), ctx.unknown_dim()),
    };
    let c = ctx.known(channels);
    set_tensor(ctx, 0, vec![h, w, c], t);
    Ok(())
}

/// `(height, width)` from the header of an encoded image, in any format this module reads.
fn image_size(b: &[u8]) -> Option<(u64, u64)> {
    let size = if b.starts_with(b"\x89PNG\r\n\x1a\n") {
        png_size(b)
    } else if b.starts_with(b"BM") {
        bmp_size(b)
    } else if b.starts_with(&[0xFF, 0xD8]) {
        jpeg_size(b)
    } else if b.starts_with(b"RIFF") && b.get(8..12) == Some(b"WEBP") {
        webp_size(b)
    } else if b.starts_with(b"II*\0") || b.starts_with(b"MM\0*") {
        tiff_size(b)
    } else if b.starts_with(&[0xFF, 0x4F, 0xFF, 0x51]) {
        j2k_codestream_size(b)
    } else if b.get(4..8) == Some(b"jP  ") {
        jp2_size(b)
    } else if b.first() == Some(&b'P') && matches!(b.get(1), Some(b'1'..=b'6')) {
        pnm_size(b)
    } else {
        None
    };
    size.filter(|&(h, w)| h > 0 && w > 0)
}

/// A big-endian `u16` at `at`.
fn be16(b: &[u8], at: usize) -> Option<u64> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?) as u64)
}

/// A big-endian `u32` at `at`.
fn be32(b: &[u8], at: usize) -> Option<u64> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?) as u64)
}

/// A little-endian `u16` at `at`.
fn le16(b: &[u8], at: usize) -> Option<u64> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?) as u64)
}

/// A little-endian `u32` at `at`.
fn le32(b: &[u8], at: usize) -> Option<u64> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?) as u64)
}

/// A little-endian 24-bit integer at `at`.
fn le24(b: &[u8], at: usize) -> Option<u64> {
    let s = b.get(at..at + 3)?;
    Some(s[0] as u64 | (s[1] as u64) << 8 | (s[2] as u64) << 16)
}

/// PNG: the `IHDR` chunk follows the signature.
fn png_size(b: &[u8]) -> Option<(u64, u64)> {
    (b.get(12..16)? == b"IHDR").then_some(())?;
    Some((be32(b, 20)?, be32(b, 16)?))
}

/// BMP: the DIB header's width and (possibly negative, top-down) height.
fn bmp_size(b: &[u8]) -> Option<(u64, u64)> {
    if le32(b, 14)? == 12 {
        return Some((le16(b, 20)?, le16(b, 18)?));
    }
    let w = le32(b, 18)? as u32 as i32;
    let h = le32(b, 22)? as u32 as i32;
    Some((h.unsigned_abs() as u64, w.unsigned_abs() as u64))
}

/// JPEG: the first start-of-frame segment.
fn jpeg_size(b: &[u8]) -> Option<(u64, u64)> {
    let mut at = 2;
    loop {
        while *b.get(at)? != 0xFF {
            at += 1;
        }
        while *b.get(at)? == 0xFF {
            at += 1;
        }
        let marker = *b.get(at)?;
        at += 1;
        if marker == 0x01 || (0xD0..=0xD9).contains(&marker) {
            continue;
        }
        let len = be16(b, at)? as usize;
        let is_sof = (0xC0..=0xCF).contains(&marker) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
        if is_sof {
            return Some((be16(b, at + 3)?, be16(b, at + 5)?));
        }
        at = at.checked_add(len)?;
    }
}

/// WebP: the first chunk, lossy (`VP8 `), lossless (`VP8L`) or extended (`VP8X`).
fn webp_size(b: &[u8]) -> Option<(u64, u64)> {
    let data = 20;
    match b.get(12..16)? {
        b"VP8 " => {
            (b.get(data + 3..data + 6)? == [0x9D, 0x01, 0x2A]).then_some(())?;
            Some((le16(b, data + 8)? & 0x3FFF, le16(b, data + 6)? & 0x3FFF))
        }
        b"VP8L" => {
            (*b.get(data)? == 0x2F).then_some(())?;
            let bits = le32(b, data + 1)?;
            Some(((bits >> 14 & 0x3FFF) + 1, (bits & 0x3FFF) + 1))
        }
        b"VP8X" => Some((le24(b, data + 7)? + 1, le24(b, data + 4)? + 1)),
        _ => None,
    }
}

/// TIFF: the `ImageWidth` (256) and `ImageLength` (257) tags of the first IFD.
fn tiff_size(b: &[u8]) -> Option<(u64, u64)> {
    let little = b.starts_with(b"II");
    let r16 = |at: usize| if little { le16(b, at) } else { be16(b, at) };
    let r32 = |at: usize| if little { le32(b, at) } else { be32(b, at) };
    let ifd = r32(4)? as usize;
    let entries = r16(ifd)? as usize;
    let (mut w, mut h) = (None, None);
    for k in 0..entries.min(4096) {
        let e = ifd.checked_add(2 + 12 * k)?;
        let value = match r16(e + 2)? {
            3 => r16(e + 8)?,
            4 => r32(e + 8)?,
            _ => continue,
        };
        match r16(e)? {
            256 => w = Some(value),
            257 => h = Some(value),
            _ => {}
        }
    }
    Some((h?, w?))
}

/// A JPEG 2000 codestream: the `SIZ` segment's image extent minus its offset.
fn j2k_codestream_size(b: &[u8]) -> Option<(u64, u64)> {
    let (x, y) = (be32(b, 8)?, be32(b, 12)?);
    let (x0, y0) = (be32(b, 16)?, be32(b, 20)?);
    Some((y.checked_sub(y0)?, x.checked_sub(x0)?))
}

/// A JP2 file: the `ihdr` box inside the `jp2h` header box.
fn jp2_size(b: &[u8]) -> Option<(u64, u64)> {
    let mut at = 0usize;
    let mut end = b.len();
    while at + 8 <= end {
        let len = be32(b, at)? as usize;
        let kind = b.get(at + 4..at + 8)?;
        if kind == b"jp2h" {
            end = at.checked_add(len)?.min(b.len());
            at += 8;
            continue;
        }
        if kind == b"ihdr" {
            return Some((be32(b, at + 8)?, be32(b, at + 12)?));
        }
        if kind == b"jp2c" {
            return j2k_codestream_size(b.get(at + 8..)?);
        }
        if len < 8 {
            return None;
        }
        at = at.checked_add(len)?;
    }
    None
}

/// PNM (`P1`–`P6`): width and height are the first two header tokens after the magic.
fn pnm_size(b: &[u8]) -> Option<(u64, u64)> {
    let mut numbers = Vec::new();
    let mut at = 2;
    while numbers.len() < 2 {
        match *b.get(at)? {
            b'#' => {
                while *b.get(at)? != b'\n' {
                    at += 1;
                }
            }
            c if c.is_ascii_digit() => {
                let start = at;
                while b.get(at).is_some_and(u8::is_ascii_digit) {
                    at += 1;
                }
                numbers.push(std::str::from_utf8(b.get(start..at)?).ok()?.parse::<u64>().ok()?);
                continue;
            }
            c if c.is_ascii_whitespace() => {}
            _ => return None,
        }
        at += 1;
    }
    Some((numbers[1], numbers[0]))
}

#[cfg(test)]
mod tests {
    use super::image_size;

    /// Every reader gives `(height, width)` = `(3, 5)` for a 5-wide, 3-high header.
    #[test]
    fn headers_give_height_then_width() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend([0, 0, 0, 5, 0, 0, 0, 3, 8, 2, 0, 0, 0]);
        let mut bmp = b"BM".to_vec();
        bmp.extend([0; 12]);
        bmp.extend(40u32.to_le_bytes());
        bmp.extend(5i32.to_le_bytes());
        bmp.extend((-3i32).to_le_bytes());
        let jpeg = vec![0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 0, 0, 0xFF, 0xC0, 0, 17, 8, 0, 3, 0, 5, 3];
        let mut vp8x = b"RIFF\0\0\0\0WEBPVP8X\x0a\0\0\0\0\0\0\0".to_vec();
        vp8x.extend([4, 0, 0, 2, 0, 0]);
        let mut vp8l = b"RIFF\0\0\0\0WEBPVP8L\0\0\0\0\x2f".to_vec();
        vp8l.extend((4u32 | 2 << 14).to_le_bytes());
        let mut tiff = b"II*\0".to_vec();
        tiff.extend(8u32.to_le_bytes());
        tiff.extend(2u16.to_le_bytes());
        tiff.extend([0x00, 0x01, 3, 0, 1, 0, 0, 0, 5, 0, 0, 0]);
        tiff.extend([0x01, 0x01, 4, 0, 1, 0, 0, 0, 3, 0, 0, 0]);
        let pnm = b"P6\n# comment\n5 3\n255\n".to_vec();
        let mut j2k = vec![0xFF, 0x4F, 0xFF, 0x51, 0, 41, 0, 0];
        for v in [7u32, 4, 2, 1] {
            j2k.extend(v.to_be_bytes());
        }
        for (name, bytes) in [
            ("png", png),
            ("bmp", bmp),
            ("jpeg", jpeg),
            ("vp8x", vp8x),
            ("vp8l", vp8l),
            ("tiff", tiff),
            ("pnm", pnm),
            ("j2k", j2k),
        ] {
            assert_eq!(image_size(&bytes), Some((3, 5)), "{name}");
        }
    }

    #[test]
    fn truncated_or_unknown_bytes_give_nothing() {
        for bytes in [&b""[..], b"\x89PNG\r\n\x1a\n", b"BM", &[0xFF, 0xD8, 0xFF], b"GIF89a", b"P6\n5"] {
            assert_eq!(image_size(bytes), None);
        }
    }
}
