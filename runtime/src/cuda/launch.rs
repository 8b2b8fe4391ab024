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
    /// One block per output tile of a batched matrix product (`tile_m` ×
    /// `tile_n` outputs, the contracted axis in steps of `k_step` through
    /// shared memory, each thread a `micro` × `micro` register tile), in a
    /// grid-stride loop over the tiles of every batch.
    Tiled {
        /// Output rows per tile.
        tile_m: u32,
        /// Output columns per tile.
        tile_n: u32,
        /// Contracted elements per shared-memory step.
        k_step: u32,
        /// Rows and columns of each thread's register tile.
        micro: u32,
    },
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

    /// Tiles of `tile_m` × `tile_n` outputs, a `micro` × `micro` register
    /// tile a thread (so `block` = (tile_m / micro) · (tile_n / micro)).
    pub fn tiled(tile_m: u32, tile_n: u32, k_step: u32, micro: u32) -> Launch {
        let block = (tile_m / micro) * (tile_n / micro);
        Launch { block, policy: Policy::Tiled { tile_m, tile_n, k_step, micro }, max_blocks: 4096 }
    }

    /// The number of blocks for `n_outer` outer points (at least one); for
    /// a tiled kernel `n_outer` is the number of output tiles (see
    /// [`Launch::tiles`]).
    pub fn grid(&self, n_outer: u64) -> u32 {
        let wanted = match self.policy {
            Policy::GridStride => n_outer.div_ceil(u64::from(self.block)),
            Policy::PerOuterPoint | Policy::Tiled { .. } => n_outer,
        };
        wanted.clamp(1, u64::from(self.max_blocks)) as u32
    }

    /// The output tiles of a `batch` of `m` × `n` products (0 for other policies).
    pub fn tiles(&self, batch: u64, m: u64, n: u64) -> u64 {
        match self.policy {
            Policy::Tiled { tile_m, tile_n, .. } => {
                batch * m.div_ceil(u64::from(tile_m)) * n.div_ceil(u64::from(tile_n))
            }
            _ => 0,
        }
    }

    /// The configuration as the manifest records it.
    pub fn to_json(&self) -> Value {
        let policy = match self.policy {
            Policy::GridStride => "grid-stride: one thread per point, blocks = ceil(points / block)",
            Policy::PerOuterPoint => "one block per outer point, threads share the reduction",
            Policy::Tiled { tile_m, tile_n, k_step, micro } => {
                return json!({
                    "block": self.block, "max_blocks": self.max_blocks,
                    "grid": "one block per output tile: blocks = batch * ceil(M / tile_m) * ceil(N / tile_n), grid-stride over the rest",
                    "tile": { "m": tile_m, "n": tile_n, "k_step": k_step, "thread_tile": [micro, micro] },
                    "shared_bytes": 4 * k_step * (tile_m + tile_n),
                })
            }
        };
        json!({ "block": self.block, "max_blocks": self.max_blocks, "grid": policy })
    }
}
