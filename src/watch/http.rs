//! The smallest HTTP server that Prometheus can scrape: `GET /metrics` and
//! `GET /` (a page linking the kept diagnoses), nothing else. One thread,
//! non-blocking sockets under poll(2), so that no client can hold another
//! up: a request's head is at most `MAX_HEAD` bytes, a connection lives at
//! most `DEADLINE`, and at most `MAX_CONNECTIONS` are open: a new one
//! closes the oldest, so idle or trickling clients cannot lock a scraper
//! out. Every response closes its connection.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub const MAX_HEAD: usize = 8192;
pub const DEADLINE: Duration = Duration::from_secs(5);
pub const MAX_CONNECTIONS: usize = 64;

/// What a path serves: `(status, content type, body)`.
pub trait Pages {
    fn metrics(&self) -> String;
    fn index(&self) -> String;
}

struct Conn {
    stream: TcpStream,
    since: Instant,
    head: Vec<u8>,
    /// The response and how much of it is written.
    reply: Option<(Vec<u8>, usize)>,
}

pub struct Server {
    listener: TcpListener,
    conns: Vec<Conn>,
}

impl Server {
    pub fn bind(addr: SocketAddr) -> std::io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(Server {
            listener,
            conns: Vec::new(),
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` is set (checked every 100 ms).
    pub fn serve(&mut self, pages: &dyn Pages, stop: &AtomicBool) {
        while !stop.load(Ordering::SeqCst) {
            self.turn(pages, 100);
        }
    }

    /// One poll: accepts, reads, answers, writes, and drops what is done or
    /// past its deadline.
    pub fn turn(&mut self, pages: &dyn Pages, timeout_ms: i32) {
        let mut fds = vec![libc::pollfd {
            fd: self.listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        for c in &self.conns {
            let events = if c.reply.is_some() {
                libc::POLLOUT
            } else {
                libc::POLLIN
            };
            fds.push(libc::pollfd {
                fd: c.stream.as_raw_fd(),
                events,
                revents: 0,
            });
        }
        // SAFETY: `fds` is a valid array of pollfd of the given length.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if n < 0 {
            return;
        }
        let mut done = vec![false; self.conns.len()];
        for (i, fd) in fds.iter().enumerate().skip(1) {
            if fd.revents == 0 {
                continue;
            }
            let c = &mut self.conns[i - 1];
            done[i - 1] = if c.reply.is_some() {
                write_some(c)
            } else {
                read_some(c, pages)
            };
        }
        let now = Instant::now();
        let mut i = 0;
        self.conns.retain(|c| {
            let keep = !done[i] && now.duration_since(c.since) < DEADLINE;
            i += 1;
            keep
        });
        if fds[0].revents != 0 {
            self.accept();
        }
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    if self.conns.len() >= MAX_CONNECTIONS {
                        // The oldest is the likeliest to be stuck.
                        self.conns.remove(0);
                    }
                    self.conns.push(Conn {
                        stream,
                        since: Instant::now(),
                        head: Vec::new(),
                        reply: None,
                    });
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return,
            }
        }
    }

    #[cfg(test)]
    pub fn open_connections(&self) -> usize {
        self.conns.len()
    }
}

/// Reads what is there; answers once the head is complete. True when the
/// connection is to be closed.
fn read_some(c: &mut Conn, pages: &dyn Pages) -> bool {
    let mut buf = [0u8; 2048];
    loop {
        match c.stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(n) => {
                c.head.extend_from_slice(&buf[..n]);
                if let Some(reply) = answer(&c.head, pages) {
                    c.reply = Some((reply, 0));
                    return write_some(c);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return true,
        }
    }
}

/// Writes what the socket takes. True when all is written (or it failed).
fn write_some(c: &mut Conn) -> bool {
    let Some((reply, at)) = &mut c.reply else {
        return true;
    };
    while *at < reply.len() {
        match c.stream.write(&reply[*at..]) {
            Ok(0) => return true,
            Ok(n) => *at += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return true,
        }
    }
    let _ = c.stream.shutdown(std::net::Shutdown::Write);
    true
}

/// The response to a request head, once there is enough of it to answer:
/// `None` while the head is incomplete and within bounds.
pub fn answer(head: &[u8], pages: &dyn Pages) -> Option<Vec<u8>> {
    let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") else {
        return (head.len() >= MAX_HEAD).then(|| status(431, "Request Header Fields Too Large"));
    };
    if end >= MAX_HEAD {
        return Some(status(431, "Request Header Fields Too Large"));
    }
    let line_end = head.windows(2).position(|w| w == b"\r\n").unwrap_or(end);
    let line = String::from_utf8_lossy(&head[..line_end]);
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Some(status(400, "Bad Request"));
    };
    if !version.starts_with("HTTP/1.") {
        return Some(status(400, "Bad Request"));
    }
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        return Some(reply(
            405,
            "Method Not Allowed",
            "text/plain; charset=utf-8",
            "only GET\n",
            &["Allow: GET, HEAD"],
            false,
        ));
    }
    let path = target.split('?').next().unwrap_or_default();
    Some(match path {
        "/metrics" => reply(
            200,
            "OK",
            crate::report::prometheus::CONTENT_TYPE,
            &pages.metrics(),
            &[],
            head_only,
        ),
        "/" => reply(
            200,
            "OK",
            "text/html; charset=utf-8",
            &pages.index(),
            &[],
            head_only,
        ),
        _ => status(404, "Not Found"),
    })
}

fn status(code: u16, reason: &str) -> Vec<u8> {
    reply(
        code,
        reason,
        "text/plain; charset=utf-8",
        &format!("{reason}\n"),
        &[],
        false,
    )
}

fn reply(
    code: u16,
    reason: &str,
    content_type: &str,
    body: &str,
    extra: &[&str],
    head_only: bool,
) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for h in extra {
        out.push_str(h);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    if !head_only {
        out.push_str(body);
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    struct Fixed;
    impl Pages for Fixed {
        fn metrics(&self) -> String {
            "up 1\n".into()
        }
        fn index(&self) -> String {
            "<p>index</p>".into()
        }
    }

    fn code(reply: &[u8]) -> String {
        String::from_utf8_lossy(reply)
            .split(' ')
            .nth(1)
            .unwrap_or_default()
            .to_string()
    }

    #[test]
    fn answers_only_get_of_its_two_paths_and_bounds_the_head() {
        let ok = answer(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &Fixed).unwrap();
        assert_eq!(code(&ok), "200");
        assert!(String::from_utf8_lossy(&ok).ends_with("\r\n\r\nup 1\n"));
        assert!(String::from_utf8_lossy(&ok).contains("Content-Length: 5\r\n"));
        let head = answer(b"HEAD /metrics HTTP/1.0\r\n\r\n", &Fixed).unwrap();
        assert!(String::from_utf8_lossy(&head).ends_with("\r\n\r\n"));
        assert_eq!(
            code(&answer(b"GET / HTTP/1.1\r\n\r\n", &Fixed).unwrap()),
            "200"
        );
        assert_eq!(
            code(&answer(b"GET /etc/passwd HTTP/1.1\r\n\r\n", &Fixed).unwrap()),
            "404"
        );
        assert_eq!(
            code(&answer(b"POST /metrics HTTP/1.1\r\n\r\n", &Fixed).unwrap()),
            "405"
        );
        assert_eq!(code(&answer(b"GET\r\n\r\n", &Fixed).unwrap()), "400");
        assert_eq!(
            code(&answer(b"GET /metrics SPDY/3\r\n\r\n", &Fixed).unwrap()),
            "400"
        );
        // Incomplete: wait for more, up to the bound.
        assert!(answer(b"GET /metrics HTTP/1.1\r\nHost:", &Fixed).is_none());
        let long = [b'a'; MAX_HEAD];
        assert_eq!(code(&answer(&long, &Fixed).unwrap()), "431");
        let mut long_header = b"GET / HTTP/1.1\r\nX: ".to_vec();
        long_header.extend([b'a'; MAX_HEAD]);
        assert_eq!(code(&answer(&long_header, &Fixed).unwrap()), "431");
    }

    /// Idle and trickling clients, more of them than the server keeps,
    /// do not keep a scrape from being answered.
    #[test]
    fn idle_clients_do_not_lock_out_a_scrape() {
        let mut server = Server::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = server.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let t = std::thread::spawn(move || {
            server.serve(&Fixed, &flag);
            server.open_connections()
        });
        let mut idle = Vec::new();
        for i in 0..MAX_CONNECTIONS + 10 {
            let mut s = TcpStream::connect(addr).unwrap();
            if i % 2 == 0 {
                s.write_all(b"GET /metr").unwrap();
            }
            idle.push(s);
        }
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut got = String::new();
        s.read_to_string(&mut got).unwrap();
        assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{got}");
        assert!(got.ends_with("up 1\n"));
        stop.store(true, Ordering::SeqCst);
        let open = t.join().unwrap();
        assert!(open <= MAX_CONNECTIONS, "{open} connections kept");
    }
}
