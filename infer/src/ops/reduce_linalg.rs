//! Operator rules: reduce_linalg family.

use super::OpTable;

pub(crate) fn register(_t: &mut OpTable) {}
