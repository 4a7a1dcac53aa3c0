//! WASI host calls wrapped around wasmtime-wasi's own, so the limits hold inside the call
//! rather than only at the next epoch tick:
//!
//! - `path_open` refuses with `EMFILE` once the job has [`MAX_OPEN_FILES`] open (every guest
//!   open is a descriptor of the trainer's process); `fd_close` and `fd_renumber` give back;
//! - `path_open` with create, `path_create_directory`, `path_symlink` and `path_link` count
//!   towards the entry limit, checked exactly once it could be reached;
//! - `fd_write` and `fd_pwrite` to a file refuse outright (the job is stopped) a single call
//!   larger than the file size limit, and measure the job directory after every call, so
//!   one call overshoots the limit by at most its own buffer; `fd_filestat_set_size` past
//!   the limit stops the job too (wasmtime-wasi refuses `fd_allocate` outright). Writes to stdout and stderr go to capped
//!   in-memory pipes and are not files (unless the guest has renumbered them).
//!
//! Each wrapper then calls the implementation wasmtime-wasi's linker would have, with the
//! same memory view and host-call fuel as its generated glue.

use wasmtime::{AsContextMut, Caller, Extern, Linker};
use wasmtime_wasi::p1::types::Errno;
use wasmtime_wasi::p1::wasi_snapshot_preview1 as p1;
use wasmtime_wasi::p1::wasi_snapshot_preview1::WasiSnapshotPreview1;
use wiggle::GuestMemory;

use crate::sandbox::Guest;
use crate::watch::{MAX_OPEN_FILES, Stop};

const MODULE: &str = "wasi_snapshot_preview1";

/// Call wasmtime-wasi's own implementation of `$func` with the caller's memory.
macro_rules! inner {
    ($caller:ident, $func:ident ( $($arg:expr),* )) => {{
        let fuel = $caller.as_context_mut().hostcall_fuel();
        let Some(Extern::Memory(memory)) = $caller.get_export("memory") else {
            return Err(wasmtime::Error::msg("missing required memory export"));
        };
        let (bytes, guest) = memory.data_and_store_mut(&mut $caller);
        guest.wasi.set_hostcall_fuel(fuel);
        let mut mem = GuestMemory::Unshared(bytes);
        p1::$func(&mut guest.wasi, &mut mem $(, $arg)*).await
    }};
}

/// Replace the WASI functions above in `linker` (which already holds wasmtime-wasi's).
pub fn add(linker: &mut Linker<Guest>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    linker.func_wrap_async(
        MODULE,
        "path_open",
        |mut caller: Caller<'_, Guest>,
         (fd, dirflags, path, path_len, oflags, base, inheriting, fdflags, out): (i32, i32, i32, i32, i32, i64, i64, i32, i32)| {
            Box::new(async move {
                if caller.data().watch.open_files >= MAX_OPEN_FILES {
                    return Ok(Errno::Mfile as i32);
                }
                let r = inner!(caller, path_open(fd, dirflags, path, path_len, oflags, base, inheriting, fdflags, out))?;
                if r == Errno::Success as i32 {
                    let w = &mut caller.data_mut().watch;
                    w.open_files += 1;
                    if oflags & OFLAGS_CREAT != 0 {
                        w.created()?;
                    }
                }
                Ok(r)
            })
        },
    )?;
    linker.func_wrap_async(MODULE, "fd_close", |mut caller: Caller<'_, Guest>, (fd,): (i32,)| {
        Box::new(async move {
            let r = inner!(caller, fd_close(fd))?;
            if r == Errno::Success as i32 {
                let w = &mut caller.data_mut().watch;
                w.open_files = w.open_files.saturating_sub(1);
            }
            Ok(r)
        })
    })?;
    linker.func_wrap_async(MODULE, "fd_renumber", |mut caller: Caller<'_, Guest>, (from, to): (i32, i32)| {
        Box::new(async move {
            let r = inner!(caller, fd_renumber(from, to))?;
            if r == Errno::Success as i32 && from != to {
                let w = &mut caller.data_mut().watch;
                w.open_files = w.open_files.saturating_sub(1);
                w.stdio_moved |= (0..=2).contains(&to) || (1..=2).contains(&from);
            }
            Ok(r)
        })
    })?;
    linker.func_wrap_async(MODULE, "fd_write", |mut caller: Caller<'_, Guest>, (fd, iovs, n, written): (i32, i32, i32, i32)| {
        Box::new(async move {
            let file = is_file(&caller, fd);
            if file {
                before_write(&mut caller, iovs, n)?;
            }
            let r = inner!(caller, fd_write(fd, iovs, n, written))?;
            if file {
                caller.data_mut().watch.check_files()?;
            }
            Ok(r)
        })
    })?;
    linker.func_wrap_async(
        MODULE,
        "fd_pwrite",
        |mut caller: Caller<'_, Guest>, (fd, iovs, n, offset, written): (i32, i32, i32, i64, i32)| {
            Box::new(async move {
                let file = is_file(&caller, fd);
                if file {
                    before_write(&mut caller, iovs, n)?;
                    grow_to(&caller, (offset as u64).saturating_add(1))?;
                }
                let r = inner!(caller, fd_pwrite(fd, iovs, n, offset, written))?;
                if file {
                    caller.data_mut().watch.check_files()?;
                }
                Ok(r)
            })
        },
    )?;
    linker.func_wrap_async(MODULE, "path_create_directory", |mut caller: Caller<'_, Guest>, (fd, path, len): (i32, i32, i32)| {
        Box::new(async move {
            let r = inner!(caller, path_create_directory(fd, path, len))?;
            created(&mut caller, r)
        })
    })?;
    linker.func_wrap_async(
        MODULE,
        "path_symlink",
        |mut caller: Caller<'_, Guest>, (old, old_len, fd, new, new_len): (i32, i32, i32, i32, i32)| {
            Box::new(async move {
                let r = inner!(caller, path_symlink(old, old_len, fd, new, new_len))?;
                created(&mut caller, r)
            })
        },
    )?;
    linker.func_wrap_async(
        MODULE,
        "path_link",
        |mut caller: Caller<'_, Guest>, (old_fd, flags, old, old_len, new_fd, new, new_len): (i32, i32, i32, i32, i32, i32, i32)| {
            Box::new(async move {
                let r = inner!(caller, path_link(old_fd, flags, old, old_len, new_fd, new, new_len))?;
                created(&mut caller, r)
            })
        },
    )?;
    linker.func_wrap_async(MODULE, "fd_filestat_set_size", |mut caller: Caller<'_, Guest>, (fd, size): (i32, i64)| {
        Box::new(async move {
            grow_to(&caller, size as u64)?;
            inner!(caller, fd_filestat_set_size(fd, size))
        })
    })?;
    Ok(())
}

/// `oflags::creat` of WASI preview 1.
const OFLAGS_CREAT: i32 = 1;

/// Count a created entry after a successful call.
fn created(caller: &mut Caller<'_, Guest>, r: i32) -> wasmtime::Result<i32> {
    if r == Errno::Success as i32 {
        caller.data_mut().watch.created()?;
    }
    Ok(r)
}

fn is_file(caller: &Caller<'_, Guest>, fd: i32) -> bool {
    caller.data().watch.stdio_moved || !(1..=2).contains(&fd)
}

/// Stop the job if one call's buffers alone exceed the file size limit (nothing is written).
fn before_write(caller: &mut Caller<'_, Guest>, iovs: i32, n: i32) -> wasmtime::Result<()> {
    let Some(Extern::Memory(memory)) = caller.get_export("memory") else { return Ok(()) };
    let data = memory.data(&caller);
    let limit = caller.data().watch.file_size_bytes();
    let mut total = 0u64;
    for i in 0..n.clamp(0, 1024) as usize {
        let at = (iovs as u32 as usize).saturating_add(i * 8);
        let Some(len) = data.get(at + 4..at + 8) else { break };
        total += u32::from_le_bytes(len.try_into().expect("4 bytes")) as u64;
    }
    if total > limit {
        return Err(wasmtime::Error::new(Stop::FileSize { bytes: total, limit }));
    }
    Ok(())
}

/// Stop the job if a file would reach `size` bytes, over the limit.
fn grow_to(caller: &Caller<'_, Guest>, size: u64) -> wasmtime::Result<()> {
    let limit = caller.data().watch.file_size_bytes();
    if size > limit {
        return Err(wasmtime::Error::new(Stop::FileSize { bytes: size, limit }));
    }
    Ok(())
}
