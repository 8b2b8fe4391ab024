//! Operator rules: control family.

use super::OpTable;

pub(crate) fn register(_t: &mut OpTable) {}
