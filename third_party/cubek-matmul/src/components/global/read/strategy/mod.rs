//! Defines the loading strategy used to bring data into shared memory.

mod base;
pub use base::*;

pub mod async_barrier;
pub mod async_full_cooperative;
pub mod async_full_cyclic;
pub mod async_full_strided;
pub mod async_full_tma;
pub mod async_tma;

pub mod async_copy;
pub mod async_partial_cyclic;
pub mod async_partial_strided;
pub mod async_partial_tma;

pub mod sync;
pub mod sync_full_cyclic;
pub mod sync_full_ordered;
pub mod sync_full_strided;
pub mod sync_full_tilewise;

pub mod sync_partial_cyclic;
pub mod sync_partial_tilewise;
