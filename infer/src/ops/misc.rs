//! Operator rules: misc family.

use super::OpTable;

pub(crate) fn register(_t: &mut OpTable) {}
