//! The network and sockets: no route to anything, no host unix socket by path or by
//! abstract name, and no socket family beyond unix and inet.

use std::os::unix::net::UnixListener;

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
