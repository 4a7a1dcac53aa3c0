//! Just enough HTTP/1.1 for a chat client: a request line, headers, a Content-Length body;
//! replies with Content-Length, or chunked for a stream of server-sent events. Keep-alive
//! unless the client says `Connection: close`.

use std::io::{self, BufRead, BufReader, Read, Write};

use serde_json::Value;

use crate::ApiError;

/// Headers larger than this are refused (431).
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
/// Bodies larger than this are refused (413): a long agent conversation is a few MB of JSON.
pub const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug)]
pub struct Request {
    pub method: String,
    /// The path without the query string.
    pub path: String,
    /// Lower-cased names, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The client asked to close the connection after this reply.
    pub fn wants_close(&self) -> bool {
        self.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }

    /// The bearer token of `Authorization`, if any.
    pub fn bearer(&self) -> Option<&str> {
        let value = self.header("authorization")?;
        value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer ")).map(str::trim)
    }
}

/// Why no request could be read: the peer left (end the connection quietly), or it sent
/// something that is not HTTP we serve (answer with the error, then close).
#[derive(Debug)]
pub enum ReadError {
    Closed,
    Bad(ApiError),
}

impl From<io::Error> for ReadError {
    fn from(_: io::Error) -> Self {
        ReadError::Closed
    }
}

fn bad(status: u16, code: &'static str, message: String) -> ReadError {
    ReadError::Bad(ApiError { status, ..ApiError::invalid(code, message) })
}

/// Read one request. `writer` receives `100 Continue` when the client expects it.
pub fn read_request<R: Read>(reader: &mut BufReader<R>, writer: &mut impl Write) -> Result<Request, ReadError> {
    let mut head = Vec::new();
    loop {
        let before = head.len();
        let n = reader.by_ref().take((MAX_HEADER_BYTES + 1 - head.len()) as u64).read_until(b'\n', &mut head)?;
        if n == 0 {
            return Err(if head.is_empty() {
                ReadError::Closed
            } else {
                bad(400, "bad_http", "the connection closed inside the request head".into())
            });
        }
        if head.len() > MAX_HEADER_BYTES {
            return Err(bad(431, "headers_too_large", format!("request headers exceed {MAX_HEADER_BYTES} bytes")));
        }
        let line = &head[before..];
        if (line == b"\r\n" || line == b"\n") && before > 0 {
            break;
        }
        if before == 0 && (line == b"\r\n" || line == b"\n") {
            head.clear(); // a stray empty line between requests
        }
    }
    let text = String::from_utf8(head).map_err(|_| bad(400, "bad_http", "the request head is not UTF-8".into()))?;
    let mut lines = text.lines();
    let start = lines.next().unwrap_or_default();
    let mut parts = start.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad(400, "bad_http", format!("not an HTTP request line: {start:?}")));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(bad(505, "bad_http", format!("{version} is not served; speak HTTP/1.1")));
    }
    let mut headers = Vec::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let Some((name, value)) = line.split_once(':') else {
            return Err(bad(400, "bad_http", format!("not a header line: {line:?}")));
        };
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let path = target.split('?').next().unwrap_or_default().to_string();
    let mut request = Request { method: method.to_string(), path, headers, body: Vec::new() };
    if request.header("transfer-encoding").is_some() {
        return Err(bad(411, "length_required", "chunked request bodies are not served; send Content-Length".into()));
    }
    let length = match request.header("content-length") {
        None => 0,
        Some(v) => v.parse::<usize>().map_err(|_| bad(400, "bad_http", format!("Content-Length {v:?} is not a number")))?,
    };
    if length > MAX_BODY_BYTES {
        return Err(bad(413, "body_too_large", format!("a body of {length} bytes is over the limit of {MAX_BODY_BYTES}")));
    }
    if request.header("expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue")) {
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        writer.flush()?;
    }
    request.body = vec![0; length];
    reader.read_exact(&mut request.body)?;
    Ok(request)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        410 => "Gone",
        411 => "Length Required",
        413 => "Payload Too Large",
        431 => "Request Header Fields Too Large",
        505 => "HTTP Version Not Supported",
        _ => "Internal Server Error",
    }
}

/// A whole JSON reply.
pub fn write_json(out: &mut impl Write, status: u16, body: &Value, close: bool) -> io::Result<()> {
    let body = serde_json::to_vec(body).expect("JSON values serialize");
    let connection = if close { "close" } else { "keep-alive" };
    write!(
        out,
        "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: {connection}\r\n\r\n",
        reason(status),
        body.len()
    )?;
    out.write_all(&body)?;
    out.flush()
}

/// A reply of server-sent events, each `data: <json>`, then `data: [DONE]`, chunked.
pub fn write_events(out: &mut impl Write, events: &[Value], close: bool) -> io::Result<()> {
    let connection = if close { "close" } else { "keep-alive" };
    write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\nConnection: {connection}\r\n\r\n"
    )?;
    let mut chunk = |data: &str| -> io::Result<()> {
        let event = format!("data: {data}\n\n");
        write!(out, "{:x}\r\n{event}\r\n", event.len())?;
        out.flush()
    };
    for event in events {
        chunk(&event.to_string())?;
    }
    chunk("[DONE]")?;
    out.write_all(b"0\r\n\r\n")?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(raw: &str) -> Result<Request, ReadError> {
        read_request(&mut BufReader::new(raw.as_bytes()), &mut Vec::new())
    }

    #[test]
    fn a_request_with_a_body_and_a_query_reads() {
        let r = read("POST /s/a/v1/chat/completions?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nAuthorization: Bearer k1\r\n\r\n{}")
            .unwrap();
        assert_eq!((r.method.as_str(), r.path.as_str(), r.body.as_slice()), ("POST", "/s/a/v1/chat/completions", b"{}".as_slice()));
        assert_eq!(r.bearer(), Some("k1"));
        assert!(!r.wants_close());
    }

    #[test]
    fn refusals_name_the_problem() {
        let code = |raw: &str| match read(raw) {
            Err(ReadError::Bad(e)) => (e.status, e.message),
            other => panic!("{other:?}"),
        };
        assert_eq!(code("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").0, 411);
        assert_eq!(code("POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n").0, 400);
        assert_eq!(code("GARBAGE\r\n\r\n").0, 400);
        assert_eq!(code(&format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEADER_BYTES))).0, 431);
        assert!(matches!(read(""), Err(ReadError::Closed)));
    }

    #[test]
    fn events_are_chunked_and_end_with_done() {
        let mut out = Vec::new();
        write_events(&mut out, &[serde_json::json!({"a": 1})], false).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("Transfer-Encoding: chunked"));
        assert!(text.contains("f\r\ndata: {\"a\":1}\n\n\r\n"), "{text}");
        assert!(text.ends_with("data: [DONE]\n\n\r\n0\r\n\r\n"), "{text}");
    }
}
