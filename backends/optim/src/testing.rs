//! A two-parameter module on the autodiff CPU device, shared by this crate's unit tests.

use burn::module::{Module, Param};
use burn::tensor::{DType, Tensor, TensorData};
use burn::{Dispatch, DispatchDevice};

#[derive(Module, Debug)]
pub struct Two<B: burn::tensor::backend::Backend> {
    pub a: Param<Tensor<B, 2>>,
    pub b: Param<Tensor<B, 1>>,
}

pub fn device() -> DispatchDevice {
    DispatchDevice::autodiff(DispatchDevice::Flex(Default::default()))
}

/// A fresh module (new `ParamId`s, as a reload from disk gives) with `a` `[2, 2]` and `b` `[2]`.
pub fn two(a: Vec<f32>, b: Vec<f32>) -> Two<Dispatch> {
    two_in(a, b, DType::F32)
}

/// [`two`] with the parameters in `dtype`.
pub fn two_in(a: Vec<f32>, b: Vec<f32>, dtype: DType) -> Two<Dispatch> {
    let d = device();
    Two {
        a: Param::from_tensor(Tensor::from_data(TensorData::new(a, [2, 2]), (&d, dtype))),
        b: Param::from_tensor(Tensor::from_data(TensorData::new(b, [2]), (&d, dtype))),
    }
}
