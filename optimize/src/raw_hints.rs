//! A first look at the main graph's stored weights, taken while the model
//! file's pages are still resident: which initializers' first two raw
//! elements differ, so that they are not uniform. The `ones-vector`
//! analysis asks whether weights are uniform after the check; with these
//! hints it need not read a weight again to learn that it is not, so
//! `check` can give the file's pages back before checking (on the 42k-node
//! GPT-2, reading each weight's first elements faulted 6 MB of the file
//! back in).

use diamond_ir::Model;

/// Per initializer of the main graph (by index), whether its raw data
/// starts with two different elements.
#[derive(Clone, Debug, Default)]
pub struct RawHints {
    differs: Vec<bool>,
}

impl RawHints {
    /// Reads the first two raw elements of each of the main graph's initializers.
    pub fn of(model: &Model) -> RawHints {
        let Some(main) = model.graph else { return RawHints::default() };
        let differs = model.graphs[main]
            .initializers
            .iter()
            .map(|t| {
                let (Some(raw), Some(bits)) = (t.data.raw.as_ref(), t.elem_type().bit_width()) else { return false };
                let width = (bits as usize / 8).max(1);
                bits % 8 == 0 && raw.len() >= 2 * width && raw[..width] != raw[width..2 * width]
            })
            .collect();
        RawHints { differs }
    }

    /// Whether initializer `i`'s first two raw elements differ (so it is not uniform).
    pub(crate) fn differs(&self, i: usize) -> bool {
        self.differs.get(i).copied().unwrap_or(false)
    }
}
