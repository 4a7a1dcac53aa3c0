mod matmul;

pub use matmul::*;
