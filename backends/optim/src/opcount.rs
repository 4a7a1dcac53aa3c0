//! A backend that records every tensor operation it runs, for tests that pin op counts
//! (this crate's, and arl-qwen3's through the `opcount` feature): burn's router over
//! burn-flex with a client that logs each [`OperationIr`] before running it. Code generic
//! over `Backend` runs here unchanged, and a test counts what one decode layer, one draw or
//! one optimizer step issues — roughly the kernels a GPU backend without fusion launches
//! (views counted too), whatever the CPU backend does with them.

use std::sync::Mutex;

use burn::backend::flex::{Flex, FlexDevice};
use burn::backend::ir::{BackendIr, OperationIr, TensorId, TensorIr};
use burn::backend::router::{BackendRouter, MultiBackendBridge, RouterTensor, Runner, RunnerChannel, RunnerClient};
use burn::tensor::backend::{BackendTypes, DTypeUsageSet, ExecutionError};
use burn::tensor::{DType, Shape, TensorData};

/// The recording backend.
pub type Counting = BackendRouter<CountingChannel>;

/// The recording backend with autodiff (an optimizer step's gradients are its inner tensors).
pub type CountingAutodiff = burn::backend::Autodiff<Counting>;

/// Every operation run on [`Counting`] since the last [`take`], in order (one log for the
/// process: tests that count hold [`lock`]).
static LOG: Mutex<Vec<OperationIr>> = Mutex::new(Vec::new());

/// Held by a test while it records, so parallel tests do not mix their operations.
static LOCK: Mutex<()> = Mutex::new(());

/// Hold the recording backend for one test (a test that failed holding it does not fail the
/// others).
pub fn lock() -> std::sync::MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The operations recorded since the last call, emptying the log.
pub fn take() -> Vec<OperationIr> {
    std::mem::take(&mut *LOG.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The names of the operations that compute something (`Drop`s of dead tensors left out), in
/// order: `Category(Op)`, e.g. `NumericFloat(Add)`, `Float(Exp)`, `BaseFloat(Reshape)`.
pub fn names(ops: &[OperationIr]) -> Vec<String> {
    ops.iter().filter(|op| !matches!(op, OperationIr::Drop(_))).map(name).collect()
}

/// `Category(Op)` of one operation, from its `Debug` form (`NumericFloat(F32, Add(…))` →
/// `NumericFloat(Add)`).
pub fn name(op: &OperationIr) -> String {
    if let OperationIr::Drop(_) = op {
        return "Drop".into();
    }
    let text = format!("{op:?}");
    let (outer, rest) = text.split_once('(').unwrap_or((&text, ""));
    let head = rest.split('(').next().unwrap_or("");
    let inner: String = head.rsplit(", ").next().unwrap_or(head).chars().take_while(|c| c.is_alphanumeric()).collect();
    format!("{outer}({inner})")
}

#[derive(Clone)]
pub struct CountingChannel;

#[derive(Clone)]
pub struct CountingClient(Runner<Flex>);

pub struct SameDevice;

impl MultiBackendBridge for SameDevice {
    type TensorHandle = <Flex as BackendIr>::Handle;
    type Device = FlexDevice;

    fn change_backend_float(tensor: Self::TensorHandle, _: Shape, _: &Self::Device) -> Self::TensorHandle {
        tensor
    }

    fn change_backend_int(tensor: Self::TensorHandle, _: Shape, _: &Self::Device) -> Self::TensorHandle {
        tensor
    }

    fn change_backend_bool(tensor: Self::TensorHandle, _: Shape, _: &Self::Device) -> Self::TensorHandle {
        tensor
    }
}

impl RunnerClient for CountingClient {
    type Device = FlexDevice;

    fn register_op(&self, op: OperationIr) {
        LOG.lock().unwrap_or_else(|e| e.into_inner()).push(op.clone());
        self.0.register_op(op);
    }

    fn read_tensor_async(&self, tensor: TensorIr) -> std::pin::Pin<Box<dyn Future<Output = Result<TensorData, ExecutionError>> + Send>> {
        self.0.read_tensor_async(tensor)
    }

    fn sync(&self) -> Result<(), ExecutionError> {
        self.0.sync()
    }

    fn create_empty_handle(&self) -> TensorId {
        self.0.create_empty_handle()
    }

    fn register_tensor_data(&self, data: TensorData) -> RouterTensor<Self> {
        let desc = self.0.register_tensor_data_desc(data);
        RouterTensor::new(desc.id, desc.shape, desc.dtype, self.clone())
    }

    fn device(&self) -> Self::Device {
        self.0.device()
    }

    fn seed(&self, seed: u64) {
        self.0.seed(seed)
    }

    fn dtype_usage(&self, dtype: DType) -> DTypeUsageSet {
        self.0.dtype_usage(dtype)
    }
}

impl RunnerChannel for CountingChannel {
    type Device = FlexDevice;
    type Bridge = SameDevice;
    type Client = CountingClient;
    type FloatElem = <Flex as BackendTypes>::FloatElem;
    type IntElem = <Flex as BackendTypes>::IntElem;
    type BoolElem = <Flex as BackendTypes>::BoolElem;

    fn name(_: &Self::Device) -> String {
        "counting".into()
    }

    fn init_client(device: &Self::Device) -> Self::Client {
        CountingClient(Runner::new(*device))
    }

    fn get_tensor_handle(tensor: &TensorIr, client: &Self::Client) -> <Flex as BackendIr>::Handle {
        client.0.get_tensor_handle(tensor)
    }

    fn register_tensor(
        client: &Self::Client,
        handle: <Flex as BackendIr>::Handle,
        shape: Shape,
        dtype: DType,
    ) -> RouterTensor<Self::Client> {
        client.0.register_tensor(handle, shape, dtype, client.clone())
    }
}
