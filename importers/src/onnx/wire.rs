//! Walking the protobuf wire format one field at a time, with prost's own
//! rules, so that a message can be decoded piece by piece yet fail exactly
//! where `Message::decode` of the whole would.
//!
//! A message is a run of fields, each a key (field number and wire type, one
//! varint) and a value; an embedded message is a length-delimited value. The
//! streaming decoder splits off the payload of the fields it converts itself
//! ([`embedded`], a zero-copy `Bytes` slice of the mapped file) and hands
//! every other field to the generated code ([`hand_over`]), which merges it
//! into a message holding the rest. prost bounds nesting (100 messages); the
//! level a field sits at is tracked as a [`Budget`] and prost is given the
//! `DecodeContext` it would have had at that level, so that decoding a node
//! on its own counts the levels above it.

use bytes::{Buf, Bytes};
use prost::encoding::{check_wire_type, decode_key, decode_varint, DecodeContext, WireType};
use prost::{DecodeError, Message};
use std::sync::OnceLock;

/// The streaming decode stopped: the bytes break a rule of the format or
/// of diamond somewhere. The decoder of whole messages, which is slower but
/// words every error, is run instead to say which.
#[derive(Debug)]
pub(super) struct Refused;

impl From<DecodeError> for Refused {
    fn from(_: DecodeError) -> Self {
        Refused
    }
}

impl From<crate::ImportError> for Refused {
    fn from(_: crate::ImportError) -> Self {
        Refused
    }
}

/// How many more levels of embedded messages prost allows below the fields
/// being read (its `recurse_count`); the fields of `ModelProto` have the
/// whole limit.
#[derive(Clone, Copy, Debug)]
pub(super) struct Budget(usize);

impl Budget {
    /// The budget of a top-level message's fields.
    pub(super) fn top() -> Budget {
        Budget(contexts().len() - 1)
    }

    /// The budget of the fields of a message embedded here; refused where
    /// prost reports its recursion limit.
    pub(super) fn enter(self) -> Result<Budget, Refused> {
        self.0.checked_sub(1).map(Budget).ok_or(Refused)
    }

    /// The context prost's generated code receives for fields at this level.
    fn context(self) -> DecodeContext {
        let all = contexts();
        all[all.len() - 1 - self.0].clone()
    }
}

/// prost's `DecodeContext` at every level, from the top (index 0) to the
/// deepest it allows. prost builds deeper contexts only inside its own
/// decoding, so they are collected once by decoding a chain of nested empty
/// messages with [`DepthProbe`], which keeps the context of each level.
fn contexts() -> &'static [DecodeContext] {
    static CONTEXTS: OnceLock<Vec<DecodeContext>> = OnceLock::new();
    CONTEXTS.get_or_init(|| {
        // Deeper than prost's limit of 100, so that the probe meets it.
        const LEVELS: usize = 128;
        let mut chain: Vec<u8> = Vec::new();
        for _ in 0..LEVELS {
            let mut outer = vec![0x0a]; // field 1, length-delimited
            prost::encoding::encode_varint(chain.len() as u64, &mut outer);
            outer.extend_from_slice(&chain);
            chain = outer;
        }
        let mut probe = DepthProbe::default();
        // The decode ends in prost's recursion-limit error; the contexts
        // seen until then are what is wanted.
        let _ = probe.merge(chain.as_slice());
        probe.seen
    })
}

/// A message that is its own field 1 and records the context each level's
/// field is read with.
#[derive(Debug, Default)]
struct DepthProbe {
    seen: Vec<DecodeContext>,
}

impl Message for DepthProbe {
    fn encode_raw(&self, _buf: &mut impl bytes::BufMut) {}

    fn merge_field(
        &mut self,
        _tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        self.seen.push(ctx.clone());
        prost::encoding::message::merge(wire_type, self, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        0
    }

    fn clear(&mut self) {
        self.seen.clear();
    }
}

/// Calls `on_field` with the number and wire type of each field of the
/// message in `buf`, `buf` then standing at the field's value; `on_field`
/// must consume the value.
pub(super) fn each_field(
    buf: &mut Bytes,
    mut on_field: impl FnMut(u32, WireType, &mut Bytes) -> Result<(), Refused>,
) -> Result<(), Refused> {
    while buf.has_remaining() {
        let (tag, wire_type) = decode_key(buf)?;
        on_field(tag, wire_type, buf)?;
    }
    Ok(())
}

/// Splits the payload of an embedded message field off `buf`, checked as
/// prost checks it: a length-delimited value, room for one more level below
/// `budget` (the level of the field), and a length within the bytes left.
pub(super) fn embedded(wire_type: WireType, buf: &mut Bytes, budget: Budget) -> Result<Bytes, Refused> {
    check_wire_type(WireType::LengthDelimited, wire_type)?;
    budget.enter()?;
    let len = decode_varint(buf)?;
    if len > buf.remaining() as u64 {
        return Err(Refused);
    }
    Ok(buf.split_to(len as usize))
}

/// Merges the field at `buf` (number `tag`) into `message` with the
/// generated code, as prost would at the level of `budget`.
pub(super) fn hand_over<M: Message>(
    message: &mut M,
    tag: u32,
    wire_type: WireType,
    buf: &mut Bytes,
    budget: Budget,
) -> Result<(), Refused> {
    Ok(message.merge_field(tag, wire_type, buf, budget.context())?)
}

/// Decodes a whole embedded message from its payload (split off by
/// [`embedded`]); `budget` is the level of its fields.
pub(super) fn decode<M: Message + Default>(mut payload: Bytes, budget: Budget) -> Result<M, Refused> {
    let mut message = M::default();
    each_field(&mut payload, |tag, wire_type, buf| hand_over(&mut message, tag, wire_type, buf, budget))?;
    Ok(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_sees_every_level_prost_allows() {
        // prost allows 100 levels below the top.
        assert_eq!(Budget::top().0, 100);
    }

    /// Messages nested `depth` levels below the top, as field 1 of each other.
    fn nested(depth: usize) -> Vec<u8> {
        let mut chain = Vec::new();
        for _ in 0..depth {
            let mut outer = vec![0x0a];
            prost::encoding::encode_varint(chain.len() as u64, &mut outer);
            outer.extend_from_slice(&chain);
            chain = outer;
        }
        chain
    }

    /// Walks `bytes` level by level with [`embedded`], decoding the last
    /// `tail` levels with prost through [`decode`].
    fn walk(bytes: &[u8], tail: usize, depth: usize) -> Result<(), Refused> {
        let mut buf = Bytes::copy_from_slice(bytes);
        let mut budget = Budget::top();
        for _ in 0..depth - tail {
            let mut payload = Bytes::new();
            each_field(&mut buf, |_, wire_type, b| {
                payload = embedded(wire_type, b, budget)?;
                Ok(())
            })?;
            buf = payload;
            budget = budget.enter()?;
        }
        decode::<DepthProbe>(buf, budget).map(drop)
    }

    #[test]
    fn walking_part_of_the_way_keeps_prosts_limit() {
        for depth in [99, 100, 101, 102] {
            let bytes = nested(depth);
            let whole = DepthProbe::default().merge(bytes.as_slice()).is_ok();
            for tail in [0, 1, depth / 2, depth - 1] {
                assert_eq!(walk(&bytes, tail, depth).is_ok(), whole, "depth {depth}, last {tail} by prost");
            }
        }
    }
}
