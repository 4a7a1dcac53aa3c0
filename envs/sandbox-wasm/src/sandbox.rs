//! [`WasmSandbox`]: one engine and compiled interpreter per process, one store per job.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use arl_core::config::SandboxConfig;
use arl_core::{Job, JobOutcome, Limits, PYTEST_AT, Sandbox, SandboxError};
use wasmtime::{Config, Engine, InstancePre, Linker, Store, Trap, UpdateDeadline};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::pipe::MemoryInputPipe;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

use crate::assets::{default_python_wasm, load_module, read_wasm, wasm_hash};
use crate::bytecode;
use crate::capture::CappedPipe;
use crate::jobdir::JobDir;
use crate::watch::{Stop, Watch};

/// How a [`WasmSandbox`] is set up.
#[derive(Clone, Debug, Default)]
pub struct WasmSettings {
    /// Ceilings: a job's own limits are lowered to these, never raised.
    pub limits: Limits,
    /// The WASI CPython; `None` picks [`default_python_wasm`].
    pub python_wasm: Option<PathBuf>,
    /// A host directory of pure-Python packages (real pytest and its dependencies,
    /// `scripts/setup/pytest.sh`) preopened read-only at [`PYTEST_AT`] in every job; `None`:
    /// none.
    pub site_packages: Option<PathBuf>,
}

impl WasmSettings {
    /// The config's limits and interpreter, and the pytest `scripts/setup/pytest.sh`
    /// installed, when it is there.
    pub fn from_config(config: &SandboxConfig) -> Self {
        let python_wasm = (!config.python_wasm.is_empty()).then(|| PathBuf::from(&config.python_wasm));
        Self { limits: config.limits(), python_wasm, site_packages: arl_core::pytest_dir() }
    }
}

/// What a job's store holds.
pub struct Guest {
    pub wasi: WasiP1Ctx,
    pub watch: Watch,
}

/// The engine and the linked, compiled interpreter: built once per interpreter file and
/// process, shared by every sandbox and job.
struct Runtime {
    engine: Engine,
    pre: InstancePre<Guest>,
    /// The interpreter's [`wasm_hash`].
    wasm_hash: String,
}

/// How often the engine's epoch advances: the granularity of the CPU and file-size checks
/// and of yielding to the wall clock.
const TICK: Duration = Duration::from_millis(10);

/// The `wasm` sandbox (see the crate docs for what a job gets).
pub struct WasmSandbox {
    settings: WasmSettings,
    runtime: Arc<Runtime>,
    python_wasm: PathBuf,
    /// The copy of the packages compiled for this interpreter ([`bytecode`]) that jobs see
    /// instead of `settings.site_packages`, when it could be made.
    pub(crate) compiled_packages: Option<PathBuf>,
}

impl WasmSandbox {
    /// Load (or compile, the first time: ≈13 s on 2 cores) the interpreter, check that job
    /// directories can be made, and find (or make, the first time) pytest's bytecode.
    pub fn new(settings: WasmSettings) -> Result<Self, SandboxError> {
        let python_wasm = settings.python_wasm.clone().unwrap_or_else(default_python_wasm);
        drop(JobDir::create(&Job::python("probe.py", Vec::new())).map_err(|e| {
            let why = match e {
                SandboxError::Setup(m) | SandboxError::Exhausted(m) => m,
                other => other.to_string(),
            };
            SandboxError::Setup(format!(
                "cannot make job directories in {} ({why}); point TMPDIR at a writable directory",
                std::env::temp_dir().display()
            ))
        })?);
        let runtime = runtime(&python_wasm)?;
        let mut sandbox = Self { settings, runtime, python_wasm, compiled_packages: None };
        if let Some(packages) = &sandbox.settings.site_packages {
            let dir = bytecode::dir_for(packages, &sandbox.runtime.wasm_hash);
            sandbox.compiled_packages =
                bytecode::ensure(&dir, packages, |job, copy| sandbox.execute(job, job.limits.clone(), Some((copy, FsPerms::ReadWrite))));
        }
        Ok(sandbox)
    }

    /// The interpreter file jobs run.
    pub fn python_wasm(&self) -> &Path {
        &self.python_wasm
    }

    /// The packages jobs see at [`PYTEST_AT`]: their copy compiled for this interpreter, else
    /// the original (`None`: no packages).
    pub fn packages(&self) -> Option<&Path> {
        self.compiled_packages.as_deref().or(self.settings.site_packages.as_deref())
    }
}

fn runtime(python_wasm: &Path) -> Result<Arc<Runtime>, SandboxError> {
    static RUNTIMES: OnceLock<Mutex<HashMap<PathBuf, Arc<Runtime>>>> = OnceLock::new();
    let mut runtimes = RUNTIMES.get_or_init(Mutex::default).lock().unwrap_or_else(|p| p.into_inner());
    if let Some(runtime) = runtimes.get(python_wasm) {
        return Ok(runtime.clone());
    }
    let wasm = read_wasm(python_wasm)?;
    let setup = |what: &str, e: wasmtime::Error| SandboxError::Setup(format!("{what}: {e}"));
    let mut config = Config::new();
    config.epoch_interruption(true);
    // CPython's C frames live on the wasm stack; leave room for the default recursion limit.
    config.max_wasm_stack(8 << 20);
    config.async_stack_size(9 << 20);
    let engine = Engine::new(&config).map_err(|e| setup("wasmtime engine", e))?;
    let hash = wasm_hash(&wasm);
    let module = load_module(&engine, python_wasm, &wasm, &hash)?;
    let mut linker: Linker<Guest> = Linker::new(&engine);
    wasmtime_wasi::p1::add_to_linker_async(&mut linker, |g: &mut Guest| &mut g.wasi).map_err(|e| setup("linking WASI", e))?;
    crate::hostcalls::add(&mut linker).map_err(|e| setup("wrapping WASI calls", e))?;
    let pre = linker.instantiate_pre(&module).map_err(|e| setup(&format!("linking {}", python_wasm.display()), e))?;
    start_ticker(&engine);
    let runtime = Arc::new(Runtime { engine, pre, wasm_hash: hash });
    runtimes.insert(python_wasm.to_path_buf(), runtime.clone());
    Ok(runtime)
}

/// Advance the engine's epoch every [`TICK`] for as long as the engine lives.
fn start_ticker(engine: &Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("arl-wasm-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(TICK);
            }
        })
        .expect("spawn the epoch thread");
}

impl Sandbox for WasmSandbox {
    fn name(&self) -> &str {
        "wasm"
    }

    fn python_packages(&self) -> Option<&str> {
        self.settings.site_packages.as_ref().map(|_| PYTEST_AT)
    }

    fn run(&self, job: &Job) -> Result<JobOutcome, SandboxError> {
        let packages = self.packages().map(|p| (p, FsPerms::ReadOnly));
        self.execute(job, clamp(&job.limits, &self.settings.limits), packages)
    }
}

impl WasmSandbox {
    /// Run `job` under `limits` (already clamped), with `packages` preopened at [`PYTEST_AT`].
    fn execute(&self, job: &Job, limits: Limits, packages: Option<(&Path, FsPerms)>) -> Result<JobOutcome, SandboxError> {
        let dir = JobDir::create(job)?;
        let stdout = CappedPipe::new(limits.output_bytes);
        let stderr = CappedPipe::new(limits.output_bytes);

        let mut argv = vec!["python".to_string(), "-I".into(), "-S".into(), "-B".into(), job.entry.clone()];
        argv.extend(job.args.iter().cloned());
        let mut wasi = WasiCtxBuilder::new();
        wasi.args(&argv).env("PATH", "/usr/bin:/bin").env("HOME", "/").env("LANG", "C.UTF-8").stdout(stdout.clone()).stderr(stderr.clone());
        if let Some(input) = &job.stdin {
            wasi.stdin(MemoryInputPipe::new(input.clone().into_bytes()));
        }
        wasi.preopened_dir(&dir.0, "/", FsPerms::ReadWrite)
            .map_err(|e| SandboxError::Setup(format!("preopening {}: {e}", dir.0.display())))?;
        if let Some((packages, perms)) = packages {
            wasi.preopened_dir(packages, PYTEST_AT, perms)
                .map_err(|e| SandboxError::Setup(format!("preopening {}: {e}", packages.display())))?;
        }

        let start = Instant::now();
        let own = job.files.len() as u64 + job.files.iter().map(|f| f.path.matches('/').count() as u64).sum::<u64>();
        let watch = Watch::new(&limits, &dir.0, own).map_err(|e| SandboxError::io(&format!("opening {}", dir.0.display()), e))?;
        let guest = Guest { wasi: wasi.build_p1(), watch };
        let mut store = Store::new(&self.runtime.engine, guest);
        store.limiter(|g| &mut g.watch);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|mut ctx| match ctx.data_mut().watch.check() {
            Ok(()) => Ok(UpdateDeadline::Yield(1)),
            Err(stop) => Err(wasmtime::Error::new(stop)),
        });
        let pre = &self.runtime.pre;
        let ended = wasmtime_wasi::runtime::in_tokio(async { tokio::time::timeout(limits.wall_timeout, run_start(pre, &mut store)).await });
        let wall_ms = start.elapsed().as_millis() as u64;
        let watch = &store.data().watch;
        let (cpu_ms, peak) = (watch.cpu_ms(), watch.peak_memory);
        drop(store);
        #[cfg(test)]
        crate::attacks::note_job_dir(&dir.0);
        drop(dir);

        let mut outcome = JobOutcome { wall_ms, cpu_ms: Some(cpu_ms), max_rss_kb: Some(peak / 1024), ..JobOutcome::default() };
        let note = match ended {
            Err(_elapsed) => {
                outcome.timed_out = true;
                outcome.signal = Some(libc::SIGKILL);
                Some(format!("wall-clock limit of {:.1} s exceeded", limits.wall_timeout.as_secs_f64()))
            }
            Ok(Err(Ended::Setup(e))) => return Err(SandboxError::Setup(format!("instantiating the WASI CPython: {e}"))),
            Ok(Ok(())) => {
                outcome.exit_code = Some(0);
                None
            }
            Ok(Err(Ended::Job(e))) => {
                if let Some(exit) = e.downcast_ref::<I32Exit>() {
                    outcome.exit_code = Some(exit.0);
                    None
                } else if let Some(stop) = e.downcast_ref::<Stop>() {
                    outcome.signal = Some(stop.signal());
                    Some(stop.to_string())
                } else if let Some(trap) = e.downcast_ref::<Trap>() {
                    outcome.signal = Some(libc::SIGSEGV);
                    Some(format!("the interpreter trapped: {trap}"))
                } else {
                    outcome.signal = Some(libc::SIGSEGV);
                    Some(format!("the interpreter failed: {e}"))
                }
            }
        };
        (outcome.stdout, outcome.stdout_truncated) = stdout.take();
        (outcome.stderr, outcome.stderr_truncated) = stderr.take();
        if let Some(note) = note {
            if !outcome.stderr.is_empty() && !outcome.stderr.ends_with('\n') {
                outcome.stderr.push('\n');
            }
            outcome.stderr.push_str(&format!("[sandbox wasm] {note}\n"));
        }
        Ok(outcome)
    }
}

enum Ended {
    /// The interpreter could not be instantiated: the sandbox's failure.
    Setup(wasmtime::Error),
    /// The job ended other than by returning from `_start` (exit, trap, a host stop).
    Job(wasmtime::Error),
}

async fn run_start(pre: &InstancePre<Guest>, store: &mut Store<Guest>) -> Result<(), Ended> {
    let instance = pre.instantiate_async(&mut *store).await.map_err(Ended::Setup)?;
    let start = instance.get_typed_func::<(), ()>(&mut *store, "_start").map_err(Ended::Setup)?;
    start.call_async(&mut *store, ()).await.map_err(Ended::Job)
}

/// A job's limits, each lowered to the sandbox's ceiling.
fn clamp(job: &Limits, ceiling: &Limits) -> Limits {
    Limits {
        wall_timeout: job.wall_timeout.min(ceiling.wall_timeout),
        cpu_seconds: job.cpu_seconds.min(ceiling.cpu_seconds),
        memory_bytes: job.memory_bytes.min(ceiling.memory_bytes),
        file_size_bytes: job.file_size_bytes.min(ceiling.file_size_bytes),
        output_bytes: job.output_bytes.min(ceiling.output_bytes),
        processes: 0,
    }
}
