//! The smallest HTTP server that Prometheus can scrape: `GET /metrics` and
//! `GET /` (a page linking the kept diagnoses), nothing else. One thread,
//! non-blocking sockets under poll(2), so that no client can hold another
//! up: a request's head is at most `MAX_HEAD` bytes, a connection lives at
//! most `DEADLINE`, and at most `MAX_CONNECTIONS` are open: a new one
//! closes the oldest, so idle or trickling clients cannot lock a scraper
//! out. Every response closes its connection.

use super::web_config::{Auth, Verdict, WebConfig};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const MAX_HEAD: usize = 8192;
pub const DEADLINE: Duration = Duration::from_secs(5);
pub const MAX_CONNECTIONS: usize = 64;
/// How often the web configuration's files are looked at for a change.
const WEB_CONFIG_CHECK: Duration = Duration::from_secs(1);

/// What a path serves: `(status, content type, body)`.
pub trait Pages {
    fn metrics(&self) -> String;
    fn index(&self) -> String;
    /// A line for the daemon's log (the web configuration read again, or
    /// refused).
    fn note(&self, _line: &str) {}
}

/// A connection's byte stream: plain TCP, or TLS over it.
enum Link {
    Plain(TcpStream),
    Tls(TcpStream, Box<rustls::ServerConnection>),
}

impl Link {
    fn fd(&self) -> i32 {
        match self {
            Link::Plain(s) | Link::Tls(s, _) => s.as_raw_fd(),
        }
    }

    /// What to poll for: the reply's bytes, or TLS's own records.
    fn events(&self, replying: bool) -> i16 {
        match self {
            Link::Plain(_) if replying => libc::POLLOUT,
            Link::Plain(_) => libc::POLLIN,
            Link::Tls(_, t) => {
                let mut e = 0;
                if t.wants_write() {
                    e |= libc::POLLOUT;
                }
                if !replying && t.wants_read() {
                    e |= libc::POLLIN;
                }
                e
            }
        }
    }

    /// Plain bytes of the request: Ok(0) at the end, WouldBlock when no
    /// more is there yet.
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let (sock, tls) = match self {
            Link::Plain(s) => return s.read(buf),
            Link::Tls(s, t) => (s, t),
        };
        loop {
            match tls.reader().read(buf) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                other => return other,
            }
            // No plain bytes yet: TLS records from the socket (WouldBlock
            // when there are none), and the handshake's answers out.
            if tls.read_tls(sock)? == 0 {
                return Ok(0);
            }
            if let Err(e) = tls.process_new_packets() {
                // The alert that says why, if the socket takes it.
                let _ = tls.write_tls(sock);
                return Err(std::io::Error::new(ErrorKind::InvalidData, e));
            }
            while tls.wants_write() {
                match tls.write_tls(sock) {
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e),
                }
            }
        }
    }

    /// Hands bytes of the reply over: to the socket, or to TLS to seal.
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        match self {
            Link::Plain(s) => s.write(data),
            Link::Tls(_, t) => {
                let n = t.writer().write(data)?;
                if n == data.len() {
                    t.send_close_notify();
                }
                Ok(n)
            }
        }
    }

    /// Sends what TLS has sealed; Ok(true) when nothing is left.
    fn flush(&mut self) -> std::io::Result<bool> {
        let Link::Tls(s, t) = self else {
            return Ok(true);
        };
        while t.wants_write() {
            match t.write_tls(s) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    fn shutdown_write(&self) {
        if let Link::Plain(s) = self {
            let _ = s.shutdown(std::net::Shutdown::Write);
        }
    }
}

struct Conn {
    link: Link,
    since: Instant,
    head: Vec<u8>,
    /// The response and how much of it is handed over.
    reply: Option<(Vec<u8>, usize)>,
}

/// `--web-config`: the file, and what it said when last read (its users'
/// checks among it).
struct Web {
    path: PathBuf,
    config: WebConfig,
    checked: Instant,
}

impl Web {
    /// Reads the file again when it or a file it names changed; a file
    /// that no longer reads keeps the configuration in force.
    fn refresh(&mut self, pages: &dyn Pages) {
        if self.checked.elapsed() < WEB_CONFIG_CHECK {
            return;
        }
        self.checked = Instant::now();
        if !self.config.changed() {
            return;
        }
        match WebConfig::load(&self.path) {
            Ok(c) => {
                self.config = c;
                pages.note(&format!("{}: read again", self.path.display()));
            }
            Err(e) => {
                pages.note(&format!(
                    "{e}; the configuration read before stays in force"
                ));
                // Not again every second for the same bad file.
                self.config.mark_seen();
            }
        }
    }
}

pub struct Server {
    listener: TcpListener,
    conns: Vec<Conn>,
    web: Option<Web>,
}

impl Server {
    pub fn bind(addr: SocketAddr) -> std::io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(Server {
            listener,
            conns: Vec::new(),
            web: None,
        })
    }

    /// Serves as `--web-config FILE` says (TLS, users); read now, and again
    /// when it changes. The error names the file and what is wrong.
    pub fn with_web_config(mut self, path: PathBuf) -> Result<Server, String> {
        let config = WebConfig::load(&path)?;
        self.web = Some(Web {
            config,
            path,
            checked: Instant::now(),
        });
        Ok(self)
    }

    /// `http` or `https`, as clients must ask.
    pub fn scheme(&self) -> &'static str {
        match &self.web {
            Some(w) if w.config.tls.is_some() => "https",
            _ => "http",
        }
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
            fds.push(libc::pollfd {
                fd: c.link.fd(),
                events: c.link.events(c.reply.is_some()),
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
                read_some(c, pages, self.web.as_mut())
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
            if let Some(w) = &mut self.web {
                w.refresh(pages);
            }
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
                    let link = match self.web.as_ref().and_then(|w| w.config.tls.as_ref()) {
                        None => Link::Plain(stream),
                        Some(tls) => match rustls::ServerConnection::new(Arc::clone(tls)) {
                            Ok(mut t) => {
                                // The reply is sealed whole before it is sent.
                                t.set_buffer_limit(None);
                                Link::Tls(stream, Box::new(t))
                            }
                            Err(_) => continue,
                        },
                    };
                    if self.conns.len() >= MAX_CONNECTIONS {
                        // The oldest is the likeliest to be stuck.
                        self.conns.remove(0);
                    }
                    self.conns.push(Conn {
                        link,
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
fn read_some(c: &mut Conn, pages: &dyn Pages, web: Option<&mut Web>) -> bool {
    let mut buf = [0u8; 2048];
    let (mut auth, headers) = match web {
        Some(w) => (Some(&mut w.config.auth), w.config.headers.as_slice()),
        None => (None, &[][..]),
    };
    loop {
        match c.link.read(&mut buf) {
            Ok(0) => return true,
            Ok(n) => {
                c.head.extend_from_slice(&buf[..n]);
                if let Some(reply) = answer(&c.head, pages, auth.as_deref_mut(), headers) {
                    c.reply = Some((reply, 0));
                    return write_some(c);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                // A TLS handshake's own records may wait to go out.
                return c.link.flush().is_err();
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return true,
        }
    }
}

/// Hands over what the link takes. True when all is sent (or it failed).
fn write_some(c: &mut Conn) -> bool {
    let Some((reply, at)) = &mut c.reply else {
        return true;
    };
    while *at < reply.len() {
        match c.link.write(&reply[*at..]) {
            Ok(0) => return true,
            Ok(n) => *at += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return true,
        }
    }
    match c.link.flush() {
        Ok(false) => return false,
        Ok(true) => {}
        Err(_) => return true,
    }
    c.link.shutdown_write();
    true
}

/// The response to a request head, once there is enough of it to answer:
/// `None` while the head is incomplete and within bounds. With users in
/// the web configuration every path needs one of them (401 otherwise);
/// its headers go on every response.
pub fn answer(
    head: &[u8],
    pages: &dyn Pages,
    auth: Option<&mut Auth>,
    headers: &[(String, String)],
) -> Option<Vec<u8>> {
    let extra: Vec<String> = headers.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    let status = |code, reason| status(code, reason, &extra);
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
    if let Some(auth) = auth {
        let fields = String::from_utf8_lossy(&head[line_end..end]);
        let authorization = fields.split("\r\n").find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case("authorization")
                .then(|| value.trim().to_string())
        });
        match auth.check(authorization.as_deref()) {
            Verdict::Allowed => {}
            Verdict::Denied => {
                return Some(plain_with(
                    401,
                    "Unauthorized",
                    "Unauthorized\n",
                    &extra,
                    "WWW-Authenticate: Basic",
                ));
            }
            Verdict::Busy => {
                return Some(plain_with(
                    429,
                    "Too Many Requests",
                    "too many password checks this second\n",
                    &extra,
                    "Retry-After: 1",
                ));
            }
        }
    }
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        return Some(plain_with(
            405,
            "Method Not Allowed",
            "only GET\n",
            &extra,
            "Allow: GET, HEAD",
        ));
    }
    let path = target.split('?').next().unwrap_or_default();
    Some(match path {
        "/metrics" => reply(
            200,
            "OK",
            crate::report::prometheus::CONTENT_TYPE,
            &pages.metrics(),
            &extra,
            head_only,
        ),
        "/" => reply(
            200,
            "OK",
            "text/html; charset=utf-8",
            &pages.index(),
            &extra,
            head_only,
        ),
        _ => status(404, "Not Found"),
    })
}

/// A plain-text answer with one header of its own beside the configured ones.
fn plain_with(code: u16, reason: &str, body: &str, extra: &[String], header: &str) -> Vec<u8> {
    let mut with = extra.to_vec();
    with.push(header.to_string());
    reply(
        code,
        reason,
        "text/plain; charset=utf-8",
        body,
        &with,
        false,
    )
}

fn status(code: u16, reason: &str, extra: &[String]) -> Vec<u8> {
    reply(
        code,
        reason,
        "text/plain; charset=utf-8",
        &format!("{reason}\n"),
        extra,
        false,
    )
}

fn reply(
    code: u16,
    reason: &str,
    content_type: &str,
    body: &str,
    extra: &[String],
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

    fn answer_plain(head: &[u8], pages: &dyn Pages) -> Option<Vec<u8>> {
        answer(head, pages, None, &[])
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
        let ok = answer_plain(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &Fixed).unwrap();
        assert_eq!(code(&ok), "200");
        assert!(String::from_utf8_lossy(&ok).ends_with("\r\n\r\nup 1\n"));
        assert!(String::from_utf8_lossy(&ok).contains("Content-Length: 5\r\n"));
        let head = answer_plain(b"HEAD /metrics HTTP/1.0\r\n\r\n", &Fixed).unwrap();
        assert!(String::from_utf8_lossy(&head).ends_with("\r\n\r\n"));
        assert_eq!(
            code(&answer_plain(b"GET / HTTP/1.1\r\n\r\n", &Fixed).unwrap()),
            "200"
        );
        assert_eq!(
            code(&answer_plain(b"GET /etc/passwd HTTP/1.1\r\n\r\n", &Fixed).unwrap()),
            "404"
        );
        assert_eq!(
            code(&answer_plain(b"POST /metrics HTTP/1.1\r\n\r\n", &Fixed).unwrap()),
            "405"
        );
        assert_eq!(code(&answer_plain(b"GET\r\n\r\n", &Fixed).unwrap()), "400");
        assert_eq!(
            code(&answer_plain(b"GET /metrics SPDY/3\r\n\r\n", &Fixed).unwrap()),
            "400"
        );
        // Incomplete: wait for more, up to the bound.
        assert!(answer_plain(b"GET /metrics HTTP/1.1\r\nHost:", &Fixed).is_none());
        let long = [b'a'; MAX_HEAD];
        assert_eq!(code(&answer_plain(&long, &Fixed).unwrap()), "431");
        let mut long_header = b"GET / HTTP/1.1\r\nX: ".to_vec();
        long_header.extend([b'a'; MAX_HEAD]);
        assert_eq!(code(&answer_plain(&long_header, &Fixed).unwrap()), "431");
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
