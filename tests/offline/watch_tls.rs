//! `watch --web-config`: the HTTP side over TLS with basic authentication,
//! read by a rustls client that trusts only the certificate made here
//! (openssl), as Prometheus would read it: the right password gets the
//! metrics, a wrong one or none gets 401 with `WWW-Authenticate: Basic`,
//! plain HTTP on the TLS port gets nothing, and a new certificate is taken
//! without a restart.

use crate::common::*;
use iosleuth::testing::{HttpPages, HttpServer};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

struct Fixed;
impl HttpPages for Fixed {
    fn metrics(&self) -> String {
        "up 1\n".into()
    }
    fn index(&self) -> String {
        "<p>index</p>".into()
    }
}

/// A GET over TLS trusting only `ca`: the response, or the TLS error.
fn get_tls(addr: SocketAddr, ca: &Path, auth: Option<(&str, &str)>) -> Result<String, String> {
    use base64::Engine;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let conn =
        rustls::ClientConnection::new(Arc::new(config), "127.0.0.1".try_into().unwrap()).unwrap();
    let sock = TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut tls = rustls::StreamOwned::new(conn, sock);
    let mut head = "GET /metrics HTTP/1.1\r\nHost: x\r\n".to_string();
    if let Some((u, p)) = auth {
        let b = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
        head.push_str(&format!("Authorization: Basic {b}\r\n"));
    }
    head.push_str("\r\n");
    tls.write_all(head.as_bytes()).map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    tls.read_to_end(&mut got).map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&got).into_owned())
}

#[test]
#[ignore = "needs openssl (scripts/test installs it)"]
fn watch_serves_over_tls_to_the_users_of_its_web_config() {
    need_programs(&["openssl"]);
    let dir = tempdir();
    make_certificate(dir.path(), "a");
    make_certificate(dir.path(), "b");
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    let web = dir.path().join("web.yml");
    // Relative paths: from the file's directory.
    let config = |cert: &str| {
        format!(
            "tls_server_config:\n  cert_file: {cert}.crt\n  key_file: {cert}.key\n  min_version: TLS12\nhttp_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\nbasic_auth_users:\n  alice: {hash}\n"
        )
    };
    std::fs::write(&web, config("a")).unwrap();
    let mut server = HttpServer::bind("127.0.0.1:0".parse().unwrap())
        .unwrap()
        .with_web_config(web.clone())
        .unwrap();
    assert_eq!(server.scheme(), "https");
    let addr = server.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let t = std::thread::spawn(move || server.serve(&Fixed, &flag));

    let ca_a = dir.path().join("a-ca.crt");
    let ok = get_tls(addr, &ca_a, Some(("alice", "s3cret"))).unwrap();
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    assert!(
        ok.contains("\r\nX-Content-Type-Options: nosniff\r\n"),
        "{ok}"
    );
    assert!(ok.ends_with("\r\n\r\nup 1\n"), "{ok}");
    for auth in [Some(("alice", "wrong")), Some(("bob", "s3cret")), None] {
        let denied = get_tls(addr, &ca_a, auth).unwrap();
        assert!(
            denied.starts_with("HTTP/1.1 401 Unauthorized\r\n")
                && denied.contains("\r\nWWW-Authenticate: Basic\r\n")
                && !denied.contains("up 1"),
            "{auth:?}: {denied}"
        );
    }
    // Plain HTTP on the TLS port: no metrics.
    let mut plain = TcpStream::connect(addr).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    plain
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let _ = plain.read_to_end(&mut got);
    assert!(
        !String::from_utf8_lossy(&got).contains("up 1"),
        "plain HTTP answered"
    );

    // A new certificate in the file: served without a restart (the file is
    // looked at once a second, at a new connection).
    std::thread::sleep(Duration::from_millis(1100));
    std::fs::write(&web, config("b")).unwrap();
    let ca_b = dir.path().join("b-ca.crt");
    let mut served_b = false;
    for _ in 0..40 {
        if get_tls(addr, &ca_b, Some(("alice", "s3cret"))).is_ok_and(|r| r.contains("up 1")) {
            served_b = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(served_b, "the new certificate was not served");
    let err = get_tls(addr, &ca_a, Some(("alice", "s3cret"))).unwrap_err();
    assert!(err.contains("certificate"), "{err}");
    stop.store(true, Ordering::SeqCst);
    t.join().unwrap();
}

/// contrib/web-config.yml, with a certificate and key beside it, is read as
/// it stands (and `watch --help` names --web-config).
#[test]
#[ignore = "needs openssl (scripts/test installs it)"]
fn the_shipped_web_config_example_reads() {
    need_programs(&["openssl"]);
    let dir = tempdir();
    make_certificate(dir.path(), "watch");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let web = dir.path().join("web-config.yml");
    std::fs::copy(root.join("contrib/web-config.yml"), &web).unwrap();
    let server = HttpServer::bind("127.0.0.1:0".parse().unwrap())
        .unwrap()
        .with_web_config(web)
        .unwrap();
    assert_eq!(server.scheme(), "https");
    let help = iosleuth().args(["watch", "--help"]).output().unwrap();
    assert!(String::from_utf8_lossy(&help.stdout).contains("--web-config <FILE>"));
}
