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
    /// Bound to a row term (which may be open). The binding's cause is kept
    /// for provenance, though no diagnostic prints it yet.
    Solved {
        value: RowTerm,
        #[allow(dead_code)]
        cause: CauseId,
    },
}

/// One union-find table: parent pointers, ranks and poison flags in dense
/// arrays of their own (a `find` walks only the 4-byte parents, which stay in
/// cache even for millions of variables), and each class's state beside them.
#[derive(Clone, Debug)]
struct Table<S> {
    parent: Vec<u32>,
    rank: Vec<u8>,
    poisoned: Vec<bool>,
    state: Vec<S>,
}

impl<S> Default for Table<S> {
    fn default() -> Self {
        Table { parent: Vec::new(), rank: Vec::new(), poisoned: Vec::new(), state: Vec::new() }
    }
}

impl<S> Table<S> {
    fn len(&self) -> usize {
        self.parent.len()
    }

    fn push(&mut self, state: S) -> u32 {
        let id = self.parent.len() as u32;
        self.parent.push(id);
        self.rank.push(0);
        self.poisoned.push(false);
        self.state.push(state);
        id
    }

    /// The root of `v`, compressing the path to it.
    fn find(&mut self, v: u32) -> u32 {
        let mut root = v;
        while self.parent[root as usize] != root {
            root = self.parent[root as usize];
        }
        let mut at = v;
        while self.parent[at as usize] != root {
            let next = self.parent[at as usize];
            self.parent[at as usize] = root;
            at = next;
        }
        root
    }
}

/// The variable tables.
#[derive(Clone, Debug, Default)]
pub(crate) struct Store {
    dims: Table<DimState>,
    rows: Table<RowState>,
}

macro_rules! union_find {
    ($table:ident, $var:ident, $state:ident, $fresh:ident, $find:ident, $state_of:ident, $set:ident, $union:ident, $poison:ident, $is_poisoned:ident) => {
        impl Store {
            /// A fresh free variable.
            pub(crate) fn $fresh(&mut self) -> $var {
                $var(self.$table.push($state::Free { upper: None }))
            }

            /// The representative of `v`'s class.
            pub(crate) fn $find(&mut self, v: $var) -> $var {
                $var(self.$table.find(v.0))
            }

            /// The state of `v`'s class.
            pub(crate) fn $state_of(&mut self, v: $var) -> &$state {
                let root = self.$table.find(v.0);
                &self.$table.state[root as usize]
            }

            /// Replaces the state of `v`'s class.
            pub(crate) fn $set(&mut self, v: $var, state: $state) {
                let root = self.$table.find(v.0);
                self.$table.state[root as usize] = state;
            }

            /// Merges the classes of `a` and `b` (both must be free); returns
            /// the new root and the state of the class that was absorbed.
            pub(crate) fn $union(&mut self, a: $var, b: $var) -> ($var, $state) {
                let t = &mut self.$table;
                let (a, b) = (t.find(a.0) as usize, t.find(b.0) as usize);
                let (ra, rb) = (t.rank[a], t.rank[b]);
                let (root, child) = if ra >= rb { (a, b) } else { (b, a) };
                if ra == rb {
                    t.rank[root] += 1;
                }
                t.parent[child] = root as u32;
                t.poisoned[root] |= t.poisoned[child];
                let absorbed = std::mem::replace(&mut t.state[child], $state::Free { upper: None });
                ($var(root as u32), absorbed)
            }

            /// Marks `v`'s class as downstream of a conflict.
            pub(crate) fn $poison(&mut self, v: $var) {
                let root = self.$table.find(v.0);
                self.$table.poisoned[root as usize] = true;
            }

            /// Whether `v`'s class is downstream of a conflict.
            pub(crate) fn $is_poisoned(&mut self, v: $var) -> bool {
                let root = self.$table.find(v.0);
                self.$table.poisoned[root as usize]
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

    /// Whether some free variable has an upper bound. (Only roots hold a
    /// state; an absorbed class's is reset to free and unbounded.)
    pub(crate) fn any_free_bounded(&self) -> bool {
        self.dims.state.iter().any(|s| matches!(s, DimState::Free { upper: Some(_) }))
            || self.rows.state.iter().any(|s| matches!(s, RowState::Free { upper: Some(_) }))
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
    ///
    /// The stored value of a solved row variable is compressed in place
    /// first ([`Store::compress_row`]), so the result is built with one
    /// allocation per flank and nothing stored is cloned whole.
    pub(crate) fn row_shallow(&mut self, r: &RowTerm) -> RowTerm {
        let solved = match r.var {
            None => None,
            Some(var) => {
                let root = self.find_row(var);
                match self.rows.state[root.0 as usize] {
                    RowState::Solved { .. } => {
                        self.compress_row(root);
                        Some(root)
                    }
                    RowState::Free { .. } => return self.flanks_around(r, &[], Some(root), &[]),
                }
            }
        };
        let Some(root) = solved else { return self.flanks_around(r, &[], None, &[]) };
        // Move the (already compressed) value out while `r`'s flanks are
        // resolved, then put it back: no clone of the stored row.
        let value = match &mut self.rows.state[root.0 as usize] {
            RowState::Solved { value, .. } => std::mem::replace(value, RowTerm::closed(Vec::new())),
            RowState::Free { .. } => unreachable!("checked above"),
        };
        let out = self.flanks_around(r, &value.leading, value.var, &value.trailing);
        if let RowState::Solved { value: slot, .. } = &mut self.rows.state[root.0 as usize] {
            *slot = value;
        }
        out
    }

    /// `r.leading · inner_leading · ⟨var⟩ · inner_trailing · r.trailing`,
    /// with `r`'s dimension variables replaced by their representatives
    /// (the inner flanks are taken as they are: they come from a compressed
    /// stored value).
    fn flanks_around(
        &mut self,
        r: &RowTerm,
        inner_leading: &[DimTerm],
        var: Option<RowVar>,
        inner_trailing: &[DimTerm],
    ) -> RowTerm {
        let mut leading = Vec::with_capacity(r.leading.len() + inner_leading.len());
        leading.extend(r.leading.iter().map(|d| self.dim_rep(d)));
        leading.extend_from_slice(inner_leading);
        let mut trailing = Vec::with_capacity(inner_trailing.len() + r.trailing.len());
        trailing.extend_from_slice(inner_trailing);
        trailing.extend(r.trailing.iter().map(|d| self.dim_rep(d)));
        RowTerm { leading, var, trailing }
    }

    /// Rewrites the stored value of the solved root `root` to its shallow
    /// resolution: solved row variables at its marker spliced in (their own
    /// values compressed first), dimension variables replaced by their
    /// representatives. The row analogue of path compression, done in place.
    fn compress_row(&mut self, root: RowVar) {
        let (next, mut value) = match &mut self.rows.state[root.0 as usize] {
            RowState::Solved { value, .. } => (value.var, std::mem::replace(value, RowTerm::closed(Vec::new()))),
            RowState::Free { .. } => return,
        };
        for d in value.leading.iter_mut().chain(value.trailing.iter_mut()) {
            if let DimTerm::Var(v) = d {
                *v = self.find_dim(*v);
            }
        }
        if let Some(next) = next {
            let next = self.find_row(next);
            value.var = Some(next);
            if matches!(self.rows.state[next.0 as usize], RowState::Solved { .. }) {
                self.compress_row(next);
                if let RowState::Solved { value: inner, .. } = &self.rows.state[next.0 as usize] {
                    value.leading.extend_from_slice(&inner.leading);
                    if !inner.trailing.is_empty() {
                        value.trailing.splice(0..0, inner.trailing.iter().cloned());
                    }
                    value.var = inner.var;
                }
            }
        }
        if let RowState::Solved { value: slot, .. } = &mut self.rows.state[root.0 as usize] {
            *slot = value;
        }
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
