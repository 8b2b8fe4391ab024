//! The facts of every lowered value, by instance and then by value id: a
//! vector per instance, as long as its graph has values, instead of one hash
//! map over (instance, value) keys. Values are dense ids, so this holds each
//! fact once, without hashing, in about half the memory of the map.

use super::facts::Facts;
use diamond_ir::entity::EntityId;
use diamond_ir::ValueId;

/// A value's key: (instance, value id in the instance's graph).
pub(crate) type Key = (u32, ValueId);

/// Facts by [`Key`], with the part of a map's interface the lowering uses.
#[derive(Default)]
pub(crate) struct FactsTable {
    instances: Vec<Vec<Option<Facts>>>,
}

impl FactsTable {
    /// Makes room for the `values` values of instance `inst`.
    pub(crate) fn start_instance(&mut self, inst: u32, values: usize) {
        let slots = self.slots(inst);
        slots.reserve_exact(values.saturating_sub(slots.len()));
    }

    /// The slots of `inst`, made on first use.
    fn slots(&mut self, inst: u32) -> &mut Vec<Option<Facts>> {
        let i = inst as usize;
        if self.instances.len() <= i {
            self.instances.resize_with(i + 1, Vec::new);
        }
        &mut self.instances[i]
    }

    pub(crate) fn get(&self, key: &Key) -> Option<&Facts> {
        self.instances.get(key.0 as usize)?.get(key.1.index())?.as_ref()
    }

    pub(crate) fn get_mut(&mut self, key: &Key) -> Option<&mut Facts> {
        self.instances.get_mut(key.0 as usize)?.get_mut(key.1.index())?.as_mut()
    }

    pub(crate) fn contains_key(&self, key: &Key) -> bool {
        self.get(key).is_some()
    }

    /// Sets the facts of `key`, replacing any.
    pub(crate) fn insert(&mut self, key: Key, facts: Facts) {
        let slots = self.slots(key.0);
        let i = key.1.index();
        if slots.len() <= i {
            slots.resize_with(i + 1, || None);
        }
        slots[i] = Some(facts);
    }
}

impl std::ops::Index<&Key> for FactsTable {
    type Output = Facts;

    fn index(&self, key: &Key) -> &Facts {
        self.get(key).expect("facts of a defined value")
    }
}
