//! Operator rules: nn family.

use super::OpTable;

pub(crate) fn register(_t: &mut OpTable) {}
