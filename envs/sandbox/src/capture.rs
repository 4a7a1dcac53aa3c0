//! Reading a child's output with a cap: everything is read (so the child never blocks on a
//! full pipe), only the first `cap` bytes are kept.

use std::io::Read;
use std::thread::JoinHandle;

/// What a capped reader kept.
pub struct Captured {
    pub bytes: Vec<u8>,
    pub truncated: bool,
}

/// Drain `source` on its own thread, keeping at most `cap` bytes.
pub fn spawn_capped<R: Read + Send + 'static>(mut source: R, cap: usize) -> JoinHandle<Captured> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut truncated = false;
        let mut buf = [0u8; 16 * 1024];
        loop {
            match source.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let room = cap.saturating_sub(kept.len());
                    if n > room {
                        truncated = true;
                    }
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        Captured { bytes: kept, truncated }
    })
}

/// Bytes as text, invalid UTF-8 replaced (a cap may split a character).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_cap_bytes_and_flags_the_rest() {
        let got = spawn_capped(std::io::Cursor::new(vec![b'x'; 100_000]), 10).join().unwrap();
        assert_eq!((got.bytes.len(), got.truncated), (10, true));
        let got = spawn_capped(std::io::Cursor::new(b"hello".to_vec()), 10).join().unwrap();
        assert_eq!((got.bytes.as_slice(), got.truncated), (&b"hello"[..], false));
    }
}
