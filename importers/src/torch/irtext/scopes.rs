//! Which values a use may name: graph inputs, outputs of earlier nodes, and
//! the parameters and values of every enclosing block — never values
//! defined inside a block that has ended. Names are unique across the whole
//! graph, as TorchScript's printer guarantees.

use std::collections::{HashMap, HashSet};

/// The values in scope at the read position, and every value defined so far.
#[derive(Default)]
pub(super) struct Scopes {
    /// The names defined in each open frame (the graph, then each block).
    frames: Vec<Vec<String>>,
    /// The names usable here: the union of `frames`.
    visible: HashSet<String>,
    /// Every name defined so far, with the line that defined it.
    defined: HashMap<String, u32>,
}

impl Scopes {
    /// Scopes with the graph's frame open.
    pub(super) fn new() -> Self {
        Scopes { frames: vec![Vec::new()], ..Scopes::default() }
    }

    /// Opens a block's frame.
    pub(super) fn open_block(&mut self) {
        self.frames.push(Vec::new());
    }

    /// Closes the innermost block's frame: its values go out of scope.
    pub(super) fn close_block(&mut self) {
        for name in self.frames.pop().unwrap_or_default() {
            self.visible.remove(&name);
        }
    }

    /// Defines `name` (on `line`) in the innermost frame, or says why not.
    pub(super) fn define(&mut self, name: &str, line: u32) -> Result<(), String> {
        if let Some(first) = self.defined.get(name) {
            return Err(format!("%{name} is defined twice (first on line {first})"));
        }
        self.defined.insert(name.to_string(), line);
        self.visible.insert(name.to_string());
        if let Some(frame) = self.frames.last_mut() {
            frame.push(name.to_string());
        }
        Ok(())
    }

    /// Checks that a use of `name` here sees a definition, or says why not.
    pub(super) fn check_use(&self, name: &str) -> Result<(), String> {
        if self.visible.contains(name) {
            return Ok(());
        }
        match self.defined.get(name) {
            Some(line) => Err(format!("%{name} (defined on line {line}, inside a block) is out of scope here")),
            None => Err(format!("%{name} is used but not defined before this point")),
        }
    }
}
