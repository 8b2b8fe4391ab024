//! An operator's domain and name held inline, as the operator table's key
//! for lookups. A lookup per node compares its key with the table's: with
//! the bytes in the table's own entries that compare reads memory the probe
//! just touched, where a `&str` key sends it to the string's own page (on a
//! 42k-node graph that miss was ~4% of a `check`).

/// The longest `domain` and `op` together that fit inline.
const CAPACITY: usize = 46;

/// `domain` and `op`, their bytes back to back, with their lengths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct InlineKey {
    domain_len: u8,
    op_len: u8,
    bytes: [u8; CAPACITY],
}

impl InlineKey {
    /// The key of (`domain`, `op`); `None` when they are too long to hold inline.
    pub(super) fn new(domain: &str, op: &str) -> Option<InlineKey> {
        let (d, o) = (domain.as_bytes(), op.as_bytes());
        if d.len() + o.len() > CAPACITY {
            return None;
        }
        let mut bytes = [0; CAPACITY];
        bytes[..d.len()].copy_from_slice(d);
        bytes[d.len()..d.len() + o.len()].copy_from_slice(o);
        Some(InlineKey { domain_len: d.len() as u8, op_len: o.len() as u8, bytes })
    }
}

#[cfg(test)]
mod tests {
    use super::InlineKey;

    #[test]
    fn keys_tell_the_split_between_domain_and_name_apart() {
        assert_ne!(InlineKey::new("ab", "c"), InlineKey::new("a", "bc"));
        assert_eq!(InlineKey::new("", "Add"), InlineKey::new("", "Add"));
        assert!(InlineKey::new("", &"x".repeat(47)).is_none());
    }
}
