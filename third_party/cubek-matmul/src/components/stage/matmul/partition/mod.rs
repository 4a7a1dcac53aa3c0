#![allow(clippy::type_complexity)]

mod fragments;
mod matmul;

pub use fragments::*;
pub use matmul::*;
