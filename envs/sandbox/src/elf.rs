//! The ELF program interpreter (`PT_INTERP`, e.g. `/lib64/ld-linux-x86-64.so.2`) of a
//! binary: the kernel opens it by that path inside the job's root, so the root needs it.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

const PT_INTERP: u32 = 3;

/// The interpreter path of a 64-bit little-endian ELF executable; `None` for a static one.
pub fn interpreter(path: &Path) -> Result<Option<PathBuf>, String> {
    let err = |e: std::io::Error| format!("reading the ELF headers of {}: {e}", path.display());
    let mut f = std::fs::File::open(path).map_err(err)?;
    let mut header = [0u8; 64];
    f.read_exact(&mut header).map_err(err)?;
    if &header[..4] != b"\x7fELF" || header[4] != 2 || header[5] != 1 {
        return Err(format!("{} is not a 64-bit little-endian ELF executable", path.display()));
    }
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as u64;
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
    let (phoff, phentsize, phnum) = (u64_at(&header, 0x20), u16_at(&header, 0x36), u16_at(&header, 0x38));
    if phentsize < 56 {
        return Err(format!("{}: odd ELF program header size {phentsize}", path.display()));
    }
    let mut ph = vec![0u8; phentsize as usize];
    for i in 0..phnum {
        f.seek(SeekFrom::Start(phoff + i * phentsize)).map_err(err)?;
        f.read_exact(&mut ph).map_err(err)?;
        if u32::from_le_bytes(ph[..4].try_into().expect("4 bytes")) != PT_INTERP {
            continue;
        }
        let (offset, size) = (u64_at(&ph, 8), u64_at(&ph, 32));
        if size == 0 || size > 4096 {
            return Err(format!("{}: odd PT_INTERP size {size}", path.display()));
        }
        let mut name = vec![0u8; size as usize];
        f.seek(SeekFrom::Start(offset)).map_err(err)?;
        f.read_exact(&mut name).map_err(err)?;
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        name.truncate(end);
        return Ok(Some(PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(name))));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_python_names_its_loader() {
        let python = crate::find_python().unwrap();
        let interp = interpreter(&std::fs::canonicalize(&python).unwrap()).unwrap().expect("a dynamic executable");
        assert!(interp.is_absolute() && interp.to_string_lossy().contains("ld-"), "{}", interp.display());
        assert!(interp.exists());
        assert!(interpreter(Path::new("/etc/hostname")).is_err() || !Path::new("/etc/hostname").exists());
    }
}
