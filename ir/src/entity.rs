//! Typed ids and the arenas they index.
//!
//! Each entity kind has its own `u32` id type, so a `NodeId` can never index the
//! value arena by mistake. An [`Arena`] only grows: ids stay valid for the life
//! of the arena, which is what lets every other structure refer to entities by
//! id instead of by reference.

use std::fmt;
use std::marker::PhantomData;

/// An id that indexes an [`Arena`].
pub trait EntityId: Copy + Eq + fmt::Debug {
    /// The id of the `index`-th entity.
    fn new(index: usize) -> Self;
    /// The position of this entity in its arena.
    fn index(self) -> usize;
}

macro_rules! entity_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(u32);

        impl EntityId for $name {
            fn new(index: usize) -> Self {
                $name(u32::try_from(index).expect("more than u32::MAX entities"))
            }
            fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(self, f)
            }
        }
    };
}

entity_id!(
    /// A graph of a model: the main graph, a subgraph of a node attribute, a
    /// function body, or a training graph.
    GraphId,
    "g"
);
entity_id!(
    /// A node within one graph.
    NodeId,
    "n"
);
entity_id!(
    /// A named value within one graph.
    ValueId,
    "v"
);

/// A growable vector indexed by a typed id.
#[derive(Clone, PartialEq)]
pub struct Arena<K: EntityId, V> {
    items: Vec<V>,
    _key: PhantomData<K>,
}

impl<K: EntityId, V> Arena<K, V> {
    /// An empty arena.
    pub fn new() -> Self {
        Arena { items: Vec::new(), _key: PhantomData }
    }

    /// Makes room for `additional` more entities (exactly that many, when
    /// the number to come is known).
    pub fn reserve_exact(&mut self, additional: usize) {
        self.items.reserve_exact(additional);
    }

    /// Adds `value` and returns its id.
    pub fn push(&mut self, value: V) -> K {
        let id = K::new(self.items.len());
        self.items.push(value);
        id
    }

    /// The number of entities.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the arena holds nothing.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The entity `id`, if it exists.
    pub fn get(&self, id: K) -> Option<&V> {
        self.items.get(id.index())
    }

    /// Ids and entities in id order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (K, &V)> + '_ {
        self.items.iter().enumerate().map(|(i, v)| (K::new(i), v))
    }

    /// Entities in id order.
    pub fn values(&self) -> std::slice::Iter<'_, V> {
        self.items.iter()
    }

    /// Entities in id order, to change in place.
    pub fn values_mut(&mut self) -> std::slice::IterMut<'_, V> {
        self.items.iter_mut()
    }

    /// All ids in order.
    pub fn ids(&self) -> impl ExactSizeIterator<Item = K> {
        (0..self.items.len()).map(K::new)
    }
}

impl<K: EntityId, V> Default for Arena<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: EntityId, V> std::ops::Index<K> for Arena<K, V> {
    type Output = V;
    fn index(&self, id: K) -> &V {
        &self.items[id.index()]
    }
}

impl<K: EntityId, V> std::ops::IndexMut<K> for Arena<K, V> {
    fn index_mut(&mut self, id: K) -> &mut V {
        &mut self.items[id.index()]
    }
}

impl<K: EntityId, V: fmt::Debug> fmt::Debug for Arena<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_print_with_their_prefix_and_index_their_arena() {
        let mut nodes: Arena<NodeId, &str> = Arena::new();
        let a = nodes.push("a");
        let b = nodes.push("b");
        assert_eq!(format!("{a} {b:?}"), "n0 n1");
        assert_eq!(nodes[b], "b");
        assert_eq!(nodes.ids().collect::<Vec<_>>(), vec![a, b]);
        assert!(nodes.get(NodeId::new(2)).is_none());
    }
}
