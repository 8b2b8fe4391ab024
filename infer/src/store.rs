//! Union-find tables for dimension and row variables.
//!
//! Each variable has a parent pointer (path-compressed, union by rank); the
//! root holds the class's state: free with an optional least upper bound, or
//! solved to a term with the cause of the binding. Solving a variable never
//! rewrites the constraint set: terms are resolved lazily ([`Store::dim`],
//! [`Store::row`]), and a solved row's stored value is replaced by its
//! resolved form each time it is read, the row analogue of path compression.

use crate::cause::CauseId;
use diamond_ir::term::{Dim, DimTerm, DimVar, RowTerm, RowVar};

/// What is known about a dimension variable's class.
#[derive(Clone, Debug)]
pub(crate) enum DimState {
    /// Unknown; `upper` is its least upper bound, if any.
    Free { upper: Option<(Dim, CauseId)> },
    /// Bound to a dimension.
    Solved { value: Dim, cause: CauseId },
}

/// What is known about a row variable's class.
#[derive(Clone, Debug)]
pub(crate) enum RowState {
    /// Unknown; `upper` is its least upper bound, if any.
    Free { upper: Option<(RowTerm, CauseId)> },
    /// Bound to a row term (which may be open).
    Solved { value: RowTerm, cause: CauseId },
}

#[derive(Clone, Debug)]
struct Entry<S> {
    parent: u32,
    rank: u8,
    poisoned: bool,
    state: S,
}

/// The variable tables.
#[derive(Clone, Debug, Default)]
pub(crate) struct Store {
    dims: Vec<Entry<DimState>>,
    rows: Vec<Entry<RowState>>,
}

macro_rules! union_find {
    ($table:ident, $var:ident, $state:ident, $fresh:ident, $find:ident, $state_of:ident, $set:ident, $union:ident, $poison:ident, $is_poisoned:ident) => {
        impl Store {
            /// A fresh free variable.
            pub(crate) fn $fresh(&mut self) -> $var {
                let id = self.$table.len() as u32;
                self.$table.push(Entry { parent: id, rank: 0, poisoned: false, state: $state::Free { upper: None } });
                $var(id)
            }

            /// The representative of `v`'s class.
            pub(crate) fn $find(&mut self, v: $var) -> $var {
                let mut root = v.0;
                while self.$table[root as usize].parent != root {
                    root = self.$table[root as usize].parent;
                }
                let mut at = v.0;
                while self.$table[at as usize].parent != root {
                    let next = self.$table[at as usize].parent;
                    self.$table[at as usize].parent = root;
                    at = next;
                }
                $var(root)
            }

            /// The state of `v`'s class.
            pub(crate) fn $state_of(&mut self, v: $var) -> &$state {
                let root = self.$find(v);
                &self.$table[root.0 as usize].state
            }

            /// Replaces the state of `v`'s class.
            pub(crate) fn $set(&mut self, v: $var, state: $state) {
                let root = self.$find(v);
                self.$table[root.0 as usize].state = state;
            }

            /// Merges the classes of `a` and `b` (both must be free); returns
            /// the new root and the state of the class that was absorbed.
            pub(crate) fn $union(&mut self, a: $var, b: $var) -> ($var, $state) {
                let (a, b) = (self.$find(a), self.$find(b));
                let (ra, rb) = (self.$table[a.0 as usize].rank, self.$table[b.0 as usize].rank);
                let (root, child) = if ra >= rb { (a, b) } else { (b, a) };
                if ra == rb {
                    self.$table[root.0 as usize].rank += 1;
                }
                self.$table[child.0 as usize].parent = root.0;
                let poisoned = self.$table[child.0 as usize].poisoned;
                self.$table[root.0 as usize].poisoned |= poisoned;
                let absorbed =
                    std::mem::replace(&mut self.$table[child.0 as usize].state, $state::Free { upper: None });
                (root, absorbed)
            }

            /// Marks `v`'s class as downstream of a conflict.
            pub(crate) fn $poison(&mut self, v: $var) {
                let root = self.$find(v);
                self.$table[root.0 as usize].poisoned = true;
            }

            /// Whether `v`'s class is downstream of a conflict.
            pub(crate) fn $is_poisoned(&mut self, v: $var) -> bool {
                let root = self.$find(v);
                self.$table[root.0 as usize].poisoned
            }
        }
    };
}

union_find!(dims, DimVar, DimState, fresh_dim, find_dim, dim_state, set_dim, union_dims, poison_dim, dim_poisoned);
union_find!(rows, RowVar, RowState, fresh_row, find_row, row_state, set_row, union_rows, poison_row, row_poisoned);

impl Store {
    /// Number of dimension variables.
    pub(crate) fn dim_count(&self) -> usize {
        self.dims.len()
    }

    /// Number of row variables.
    pub(crate) fn row_count(&self) -> usize {
        self.rows.len()
    }

    /// `t` with its variable replaced by the class's value or representative.
    pub(crate) fn dim(&mut self, t: &DimTerm) -> DimTerm {
        match t {
            DimTerm::Dim(_) => t.clone(),
            DimTerm::Var(v) => match self.dim_state(*v) {
                DimState::Solved { value, .. } => DimTerm::Dim(value.clone()),
                DimState::Free { .. } => DimTerm::Var(self.find_dim(*v)),
            },
        }
    }

    /// `r` with every solved variable substituted (splicing at the marker)
    /// and every free one replaced by its representative.
    pub(crate) fn row(&mut self, r: &RowTerm) -> RowTerm {
        let mut row = self.row_shallow(r);
        for d in row.leading.iter_mut().chain(row.trailing.iter_mut()) {
            if let DimTerm::Var(v) = d {
                if let DimState::Solved { value, .. } = self.dim_state(*v) {
                    *d = DimTerm::Dim(value.clone());
                }
            }
        }
        row
    }

    /// `r` with solved row variables substituted but dimension variables
    /// kept (as their representatives), so that rules decomposing rows still
    /// know which variable each axis came from.
    pub(crate) fn row_shallow(&mut self, r: &RowTerm) -> RowTerm {
        let mut out = RowTerm {
            leading: r.leading.iter().map(|d| self.dim_rep(d)).collect(),
            var: None,
            trailing: r.trailing.iter().map(|d| self.dim_rep(d)).collect(),
        };
        let Some(var) = r.var else { return out };
        let root = self.find_row(var);
        let solved = match self.row_state(root) {
            RowState::Solved { value, cause } => Some((value.clone(), *cause)),
            RowState::Free { .. } => None,
        };
        match solved {
            None => out.var = Some(root),
            Some((value, cause)) => {
                let resolved = self.row_shallow(&value);
                if resolved != value {
                    self.set_row(root, RowState::Solved { value: resolved.clone(), cause });
                }
                out.leading.extend(resolved.leading);
                let mut trailing = resolved.trailing;
                trailing.append(&mut out.trailing);
                out.trailing = trailing;
                out.var = resolved.var;
            }
        }
        out
    }

    /// A dimension variable's representative (solved or not); dims unchanged.
    fn dim_rep(&mut self, t: &DimTerm) -> DimTerm {
        match t {
            DimTerm::Var(v) => DimTerm::Var(self.find_dim(*v)),
            DimTerm::Dim(_) => t.clone(),
        }
    }

    /// Whether a row mentions a poisoned variable.
    pub(crate) fn row_mentions_poison(&mut self, r: &RowTerm) -> bool {
        r.var.is_some_and(|v| self.row_poisoned(v))
            || r.leading.iter().chain(&r.trailing).any(|d| matches!(d, DimTerm::Var(v) if self.dim_poisoned(*v)))
    }

    /// Poisons every variable of a resolved row.
    pub(crate) fn poison_row_term(&mut self, r: &RowTerm) {
        if let Some(v) = r.var {
            self.poison_row(v);
        }
        for d in r.leading.iter().chain(&r.trailing) {
            if let DimTerm::Var(v) = d {
                self.poison_dim(*v);
            }
        }
    }
}
