//! The guest's stdout and stderr: kept in memory up to a cap, the rest read and dropped
//! (so a flood neither blocks nor fails the guest's writes).

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

#[derive(Default)]
struct Kept {
    bytes: Vec<u8>,
    truncated: bool,
}

/// A capped in-memory output; clones share the buffer.
#[derive(Clone)]
pub struct CappedPipe {
    cap: usize,
    kept: Arc<Mutex<Kept>>,
}

impl CappedPipe {
    pub fn new(cap: usize) -> Self {
        Self { cap, kept: Arc::default() }
    }

    fn push(&self, data: &[u8]) {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let room = self.cap.saturating_sub(kept.bytes.len());
        if data.len() > room {
            kept.truncated = true;
        }
        kept.bytes.extend_from_slice(&data[..data.len().min(room)]);
    }

    /// The kept text (invalid UTF-8 replaced: the cap may split a character) and whether
    /// anything was dropped.
    pub fn take(&self) -> (String, bool) {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        (String::from_utf8_lossy(&kept.bytes).into_owned(), kept.truncated)
    }
}

impl IsTerminal for CappedPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CappedPipe {
    async fn ready(&mut self) {}
}

impl OutputStream for CappedPipe {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

impl tokio::io::AsyncWrite for CappedPipe {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl StdoutStream for CappedPipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_up_to_the_cap_and_flags_the_rest() {
        let pipe = CappedPipe::new(5);
        pipe.clone().push(b"abc");
        pipe.push(b"defg");
        assert_eq!(pipe.take(), ("abcde".to_string(), true));
        let pipe = CappedPipe::new(5);
        pipe.push(b"abcde");
        assert_eq!(pipe.take(), ("abcde".to_string(), false));
    }
}
