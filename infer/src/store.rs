//! Union-find tables for dimension and row variables.
//!
//! Each variable has a parent pointer (path-compressed, union by rank); the
//! root holds the class's state: free with an optional least upper bound, or
//! solved to a term with the cause of the binding. Solving a variable never
//! rewrites the constraint set: terms are resolved lazily ([`Store::dim`],
//! [`Store::row`]), and a solved row's stored value has the solved row
//! variables at its marker spliced in when it is read, the row analogue of
//! path compression.
//!
//! Terms are the interned [`D`]s and arena rows [`R`] of [`crate::interned`];
//! the store owns the dimension table and the row arena.

use crate::cause::CauseId;
use crate::interned::{DimTable, Flat, D, R};
use diamond_ir::term::{DimVar, RowTerm, RowVar};

/// What is known about a dimension variable's class.
#[derive(Clone, Copy, Debug)]
pub(crate) enum DimState {
    /// Unknown; `upper` is its least upper bound, if any.
    Free { upper: Option<(D, CauseId)> },
    /// Bound to a dimension (never a variable).
    Solved { value: D, cause: CauseId },
}

/// What is known about a row variable's class.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RowState {
    /// Unknown; `upper` is its least upper bound, if any.
    Free { upper: Option<(R, CauseId)> },
    /// Bound to a row term (which may be open). The binding's cause is kept
    /// for provenance, though no diagnostic prints it yet.
    Solved {
        value: R,
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

/// The variable tables, the dimension table and the row arena.
#[derive(Clone, Debug, Default)]
pub(crate) struct Store {
    dims: Table<DimState>,
    rows: Table<RowState>,
    /// Every dimension not encoded in its id.
    pub(crate) table: DimTable,
    /// The axes of every row, flank after flank.
    arena: Vec<D>,
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

    /// Stores `leading · ⟨var⟩ · trailing` in the arena.
    pub(crate) fn alloc(&mut self, leading: &[D], var: Option<RowVar>, trailing: &[D]) -> R {
        let start = self.arena.len() as u32;
        self.arena.extend_from_slice(leading);
        self.arena.extend_from_slice(trailing);
        R::new(start, leading.len() as u32, trailing.len() as u32, var)
    }

    /// Stores a resolved row in the arena.
    pub(crate) fn alloc_flat(&mut self, f: &Flat) -> R {
        self.alloc(f.leading(), f.var, f.trailing())
    }

    /// The leading flank of `r` as stored.
    pub(crate) fn leading(&self, r: R) -> &[D] {
        &self.arena[r.start as usize..(r.start + r.lead) as usize]
    }

    /// The trailing flank of `r` as stored.
    pub(crate) fn trailing(&self, r: R) -> &[D] {
        let from = (r.start + r.lead) as usize;
        &self.arena[from..from + r.trail as usize]
    }

    /// Whether two stored rows have the same terms.
    pub(crate) fn same_row(&self, a: R, b: R) -> bool {
        a.var() == b.var() && self.leading(a) == self.leading(b) && self.trailing(a) == self.trailing(b)
    }

    /// Interns a public row.
    pub(crate) fn intern_row(&mut self, r: &RowTerm) -> R {
        let start = self.arena.len() as u32;
        for d in r.leading.iter().chain(&r.trailing) {
            let d = self.table.term(d);
            self.arena.push(d);
        }
        R::new(start, r.leading.len() as u32, r.trailing.len() as u32, r.var)
    }

    /// The public form of a resolved row.
    pub(crate) fn flat_term(&self, f: &Flat) -> RowTerm {
        let term = |ds: &[D]| ds.iter().map(|&d| self.table.to_term(d)).collect();
        RowTerm { leading: term(f.leading()), var: f.var, trailing: term(f.trailing()) }
    }

    /// `t` with its variable replaced by the class's value or representative.
    pub(crate) fn dim(&mut self, t: D) -> D {
        match t.as_var() {
            None => t,
            Some(v) => match *self.dim_state(v) {
                DimState::Solved { value, .. } => value,
                DimState::Free { .. } => D::var(self.find_dim(v)),
            },
        }
    }

    /// A dimension variable's representative (solved or not); dims unchanged.
    fn dim_rep(&mut self, t: D) -> D {
        match t.as_var() {
            Some(v) => D::var(self.find_dim(v)),
            None => t,
        }
    }

    /// `r` with every solved variable substituted (splicing at the marker)
    /// and every free one replaced by its representative.
    pub(crate) fn row(&mut self, r: R) -> Flat {
        let mut row = self.row_shallow(r);
        for i in 0..row.dims.len() {
            if let Some(v) = row.dims[i].as_var() {
                if let DimState::Solved { value, .. } = *self.dim_state(v) {
                    row.dims[i] = value;
                }
            }
        }
        row
    }

    /// `r` with solved row variables substituted but dimension variables
    /// kept (as their representatives), so that rules decomposing rows still
    /// know which variable each axis came from.
    ///
    /// The stored value of a solved row variable is compressed first
    /// ([`Store::compress_row`]), so its chain is walked once.
    pub(crate) fn row_shallow(&mut self, r: R) -> Flat {
        let mut out = Flat::default();
        for i in 0..r.lead {
            let d = self.arena[(r.start + i) as usize];
            let d = self.dim_rep(d);
            out.dims.push(d);
        }
        let mut var = None;
        if let Some(v) = r.var() {
            let root = self.find_row(v);
            match self.rows.state[root.0 as usize] {
                RowState::Solved { .. } => {
                    let value = self.compress_row(root);
                    for i in 0..value.lead {
                        let d = self.arena[(value.start + i) as usize];
                        let d = self.dim_rep(d);
                        out.dims.push(d);
                    }
                    out.lead = out.dims.len();
                    var = value.var();
                    for i in value.lead..value.lead + value.trail {
                        let d = self.arena[(value.start + i) as usize];
                        let d = self.dim_rep(d);
                        out.dims.push(d);
                    }
                }
                RowState::Free { .. } => {
                    out.lead = out.dims.len();
                    var = Some(root);
                }
            }
        } else {
            out.lead = out.dims.len();
        }
        out.var = var;
        for i in r.lead..r.lead + r.trail {
            let d = self.arena[(r.start + i) as usize];
            let d = self.dim_rep(d);
            out.dims.push(d);
        }
        out
    }

    /// Rewrites the stored value of the solved root `root` so that its row
    /// variable is free: solved row variables at its marker spliced in
    /// (their own values compressed first). The row analogue of path
    /// compression; a new arena row is made only when something is spliced.
    /// Returns the compressed value.
    fn compress_row(&mut self, root: RowVar) -> R {
        let RowState::Solved { value, cause } = self.rows.state[root.0 as usize] else {
            return R::new(0, 0, 0, Some(root));
        };
        let Some(next) = value.var() else { return value };
        let next = self.find_row(next);
        let compressed = match self.rows.state[next.0 as usize] {
            RowState::Solved { .. } => {
                let inner = self.compress_row(next);
                let start = self.arena.len();
                self.arena.extend_from_within(value.start as usize..(value.start + value.lead) as usize);
                self.arena.extend_from_within(inner.start as usize..(inner.start + inner.lead + inner.trail) as usize);
                let from = (value.start + value.lead) as usize;
                self.arena.extend_from_within(from..from + value.trail as usize);
                R::new(start as u32, value.lead + inner.lead, inner.trail + value.trail, inner.var())
            }
            RowState::Free { .. } if next.0 != value.var().map_or(u32::MAX, |v| v.0) => {
                R::new(value.start, value.lead, value.trail, Some(next))
            }
            RowState::Free { .. } => return value,
        };
        self.rows.state[root.0 as usize] = RowState::Solved { value: compressed, cause };
        compressed
    }

    /// Whether a row mentions a poisoned variable.
    pub(crate) fn row_mentions_poison(&mut self, r: &Flat) -> bool {
        r.var.is_some_and(|v| self.row_poisoned(v))
            || r.dims.iter().any(|d| d.as_var().is_some_and(|v| self.dim_poisoned(v)))
    }

    /// Poisons every variable of a resolved row.
    pub(crate) fn poison_row_term(&mut self, r: &Flat) {
        if let Some(v) = r.var {
            self.poison_row(v);
        }
        for d in &r.dims {
            if let Some(v) = d.as_var() {
                self.poison_dim(v);
            }
        }
    }
}
