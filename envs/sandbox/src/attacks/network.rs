//! The network and sockets: no route to anything, no host unix socket by path or by
//! abstract name, and no socket family beyond unix and inet.

use std::os::unix::net::UnixListener;
use std::path::Path;

use super::support::{lines, run};

#[test]
fn attack_host_unix_sockets_are_unreachable_by_path_or_abstract_name() {
    // A "host daemon" listening on a path in the host's temp dir and on an abstract name,
    // and the well-known daemons' sockets where this host has them.
    let path = std::env::temp_dir().join(format!("arl-daemon-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let by_path = UnixListener::bind(&path).unwrap();
    by_path.set_nonblocking(true).unwrap();
    let name = format!("arl-daemon-{}", std::process::id());
    let abstract_addr =
        <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(name.as_bytes()).unwrap();
    let by_name = UnixListener::bind_addr(&abstract_addr).unwrap();
    by_name.set_nonblocking(true).unwrap();
    let targets = [
        format!("{:?}", path.display().to_string()),
        format!("'\\0{name}'"),
        "'/run/dbus/system_bus_socket'".into(),
        "'/var/run/docker.sock'".into(),
        "'/run/systemd/journal/socket'".into(),
        "'/dev/log'".into(),
    ];
    let code = format!(
        "import socket\nfor addr in [{}]:\n    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n    try:\n        s.connect(addr)\n        print('connected', repr(addr))\n    except OSError as e:\n        print('refused', e.errno)\n",
        targets.join(", ")
    );
    let out = run(&code);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(lines(&out).len(), targets.len(), "{out:?}");
    assert!(lines(&out).iter().all(|l| l.starts_with("refused")), "{out:?}");
    assert!(by_path.accept().is_err() && by_name.accept().is_err(), "a host listener saw a connection");
}

#[test]
fn attack_vsock_netlink_and_other_families_are_refused() {
    // This host is a VM guest: AF_VSOCK would reach the hypervisor's host side.
    let families = [
        ("AF_VSOCK", libc::AF_VSOCK),
        ("AF_NETLINK", libc::AF_NETLINK),
        ("AF_PACKET", libc::AF_PACKET),
        ("AF_ALG", libc::AF_ALG),
        ("AF_KEY", libc::AF_KEY),
        ("AF_BLUETOOTH", libc::AF_BLUETOOTH),
        ("AF_TIPC", libc::AF_TIPC),
        ("AF_RDS", libc::AF_RDS),
    ];
    let list: Vec<String> = families.iter().map(|(n, f)| format!("('{n}', {f})")).collect();
    let code = format!(
        "import socket\nfor name, family in [{}]:\n    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_RAW):\n        try:\n            socket.socket(family, kind).close()\n            print('created', name, kind)\n        except OSError as e:\n            print('refused', name, e.errno)\ntry:\n    socket.socketpair(socket.AF_UNIX)\n    print('socketpair ok')\nexcept OSError as e:\n    print('socketpair refused', e.errno)\n",
        list.join(", ")
    );
    let out = run(&code);
    let l = lines(&out);
    assert_eq!(l.len(), families.len() * 3 + 1, "{out:?}");
    for line in &l[..families.len() * 3] {
        assert!(line.starts_with("refused") && line.ends_with(&format!(" {}", libc::EAFNOSUPPORT)), "{out:?}");
    }
    assert_eq!(l.last().copied(), Some("socketpair ok"), "{out:?}");
}

#[test]
fn attack_io_uring_and_namespace_calls_are_refused() {
    // io_uring can open sockets behind a seccomp filter's back; new namespaces, mounts and
    // keyrings are more kernel than a job needs.
    let code = format!(
        "import ctypes, os\nlibc = ctypes.CDLL('libc.so.6', use_errno=True)\nfor name, nr, args in [('io_uring_setup', {}, (8, ctypes.create_string_buffer(120))), ('unshare', {}, (0x10000000,)), ('mount', {}, (b'none', b'/job', b'tmpfs', 0, None)), ('keyctl', {}, (0, 0)), ('bpf', {}, (0, None, 0))]:\n    r = libc.syscall(nr, *args)\n    print(name, r, ctypes.get_errno())\n",
        libc::SYS_io_uring_setup,
        libc::SYS_unshare,
        libc::SYS_mount,
        libc::SYS_keyctl,
        libc::SYS_bpf
    );
    let out = run(&code);
    assert_eq!(
        lines(&out),
        ["io_uring_setup -1 1", "unshare -1 1", "mount -1 1", "keyctl -1 1", "bpf -1 1"],
        "each fails with EPERM: {out:?}"
    );
}

#[test]
fn attack_a_job_with_an_endpoint_reaches_that_socket_and_nothing_else() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::fs::PermissionsExt;

    use arl_core::{Job, JobFile, Sandbox};

    assert_eq!(crate::child::ENDPOINT.to_str().unwrap(), arl_core::ENDPOINT_AT);
    // The endpoint: a unix socket in a directory only the trainer may enter.
    let dir = std::env::temp_dir().join(format!("arl-endpoint-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let socket = dir.join("endpoint.sock");
    let endpoint = UnixListener::bind(&socket).unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let server = std::thread::spawn(move || {
        let (stream, _) = endpoint.accept().unwrap();
        let mut line = String::new();
        BufReader::new(&stream).read_line(&mut line).unwrap();
        (&stream).write_all(format!("pong {line}").as_bytes()).unwrap();
    });
    // What it must not reach: a TCP server on the host's loopback, a unix socket beside the
    // endpoint's, and the endpoint's directory itself.
    let host_tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    host_tcp.set_nonblocking(true).unwrap();
    let beside = UnixListener::bind(dir.join("other.sock")).unwrap();
    beside.set_nonblocking(true).unwrap();
    let port = host_tcp.local_addr().unwrap().port();
    let code = format!(
        r#"import os, socket
s = socket.socket(socket.AF_UNIX); s.connect({at:?}); s.sendall(b"ping\n"); print(s.recv(100).decode().strip()); s.close()
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
c = socket.create_connection(l.getsockname(), timeout=2); a, _ = l.accept(); c.sendall(b"x"); print("own loopback", a.recv(1).decode())
for addr in [("127.0.0.1", {port}), ("1.1.1.1", 80)]:
    try:
        socket.create_connection(addr, timeout=1).close(); print("connected", addr)
    except OSError as e:
        print("refused", addr)
for path in [{beside:?}, {dir:?}]:
    try:
        s = socket.socket(socket.AF_UNIX); s.connect(path); print("connected", path)
    except OSError as e:
        print("refused", path)
print("sees", sorted(n for n in os.listdir("/") if "sock" in n))
"#,
        at = arl_core::ENDPOINT_AT,
        beside = dir.join("other.sock").display().to_string(),
        dir = dir.join("endpoint.sock").display().to_string(),
    );
    let job = Job::python("main.py", vec![JobFile { path: "main.py".into(), contents: code }]);
    let out = super::support::sandbox().run_with_endpoint(&job, &socket).expect("the sandbox runs the job");
    super::support::assert_nothing_outlived();
    server.join().unwrap();
    let got = lines(&out);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(got[0], "pong ping", "{out:?}");
    assert_eq!(got[1], "own loopback x", "{out:?}");
    assert_eq!(got.iter().filter(|l| l.starts_with("refused")).count(), 4, "{out:?}");
    assert!(!out.stdout.contains("connected"), "{out:?}");
    assert_eq!(got.last().unwrap(), &"sees ['endpoint.sock']", "{out:?}");
    assert!(host_tcp.accept().is_err() && beside.accept().is_err(), "a host listener saw a connection");
    // A path that is not a socket is refused before any job starts.
    let refused = super::support::sandbox().run_with_endpoint(&job, Path::new("/etc/hostname")).unwrap_err();
    assert!(refused.to_string().contains("not a unix socket"), "{refused}");
}
