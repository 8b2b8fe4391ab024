//! Launch configurations: how many blocks of how many threads a generated
//! kernel runs as, chosen per kernel from its kind and the bound sizes.

use serde_json::{json, Value};

/// How the grid follows the work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// One thread per point of the space, in a grid-stride loop.
    GridStride,
    /// One block per outer point (its threads share the reduction), in a
    /// grid-stride loop over the outer points.
    PerOuterPoint,
}

/// A kernel's launch configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Threads per block.
    pub block: u32,
    /// How the number of blocks follows the sizes.
    pub policy: Policy,
    /// The most blocks launched (the grid-stride loops cover the rest).
    pub max_blocks: u32,
}

impl Launch {
    /// One thread a point, `block` threads a block.
    pub fn grid_stride(block: u32) -> Launch {
        Launch { block, policy: Policy::GridStride, max_blocks: 4096 }
    }

    /// One block an outer point.
    pub fn per_outer_point(block: u32) -> Launch {
        Launch { block, policy: Policy::PerOuterPoint, max_blocks: 4096 }
    }

    /// The number of blocks for `n_outer` outer points (at least one).
    pub fn grid(&self, n_outer: u64) -> u32 {
        let wanted = match self.policy {
            Policy::GridStride => n_outer.div_ceil(u64::from(self.block)),
            Policy::PerOuterPoint => n_outer,
        };
        wanted.clamp(1, u64::from(self.max_blocks)) as u32
    }

    /// The configuration as the manifest records it.
    pub fn to_json(&self) -> Value {
        let policy = match self.policy {
            Policy::GridStride => "grid-stride: one thread per point, blocks = ceil(points / block)",
            Policy::PerOuterPoint => "one block per outer point, threads share the reduction",
        };
        json!({ "block": self.block, "max_blocks": self.max_blocks, "grid": policy })
    }
}
