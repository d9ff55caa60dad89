//! `watch --web-config FILE`: TLS and basic authentication, configured as
//! Prometheus' own exporters configure them (the exporter toolkit's web
//! configuration file): `tls_server_config` (certificate and key, TLS
//! versions, client certificates checked against a CA), `basic_auth_users`
//! (user: bcrypt hash) and `http_server_config.headers`. A key iosleuth
//! does not implement is refused by name rather than ignored: a setting
//! the operator believes in force must be. Relative paths are taken from
//! the file's directory, as the exporter toolkit takes them.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;
use yaml_rust2::{Yaml, YamlLoader};

/// A web configuration file's size bound (it holds a few names and paths,
/// or inline PEM).
const MAX_FILE_BYTES: u64 = 1 << 20;

/// What a web configuration file asks for.
pub struct WebConfig {
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// The users and their bcrypt hashes (none: no authentication), with
    /// what was verified of them.
    pub auth: Auth,
    /// Headers added to every response.
    pub headers: Vec<(String, String)>,
    /// The files it was built from and their modification times: the
    /// server builds it again when one of them changes.
    sources: Vec<(PathBuf, Option<SystemTime>)>,
}

impl std::fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebConfig")
            .field("tls", &self.tls.is_some())
            .field("users", &self.auth.users.len())
            .field("headers", &self.headers)
            .finish()
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Headers the exporter toolkit lets a web configuration set.
const SETTABLE_HEADERS: [&str; 6] = [
    "Strict-Transport-Security",
    "X-Content-Type-Options",
    "X-Frame-Options",
    "X-XSS-Protection",
    "Content-Security-Policy",
    "Referrer-Policy",
];

impl WebConfig {
    /// Reads and checks `path`; the error names the file and what is wrong.
    pub fn load(path: &Path) -> Result<WebConfig, String> {
        let at = |what: String| format!("{}: {what}", path.display());
        let text = read_bounded(path).map_err(at)?;
        let docs = YamlLoader::load_from_str(&text).map_err(|e| at(format!("not YAML: {e}")))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut config = WebConfig {
            tls: None,
            auth: Auth::new(Vec::new()),
            headers: Vec::new(),
            sources: vec![(path.to_path_buf(), modified(path))],
        };
        let root = match docs.as_slice() {
            [] => return Ok(config),
            [Yaml::Null] => return Ok(config),
            [Yaml::Hash(h)] => h,
            [_] => return Err(at("not a mapping of settings".into())),
            _ => return Err(at("more than one YAML document".into())),
        };
        for (key, value) in root {
            match key_name(key).map_err(&at)? {
                "tls_server_config" => {
                    config.tls = tls_config(value, dir, &mut config.sources).map_err(&at)?
                }
                "basic_auth_users" => config.auth = Auth::new(users(value).map_err(&at)?),
                "http_server_config" => config.headers = http_config(value).map_err(&at)?,
                "rate_limit" => {
                    return Err(at(
                        "rate_limit is not implemented by iosleuth (it answers every scrape itself, one at a time)".into(),
                    ))
                }
                other => return Err(at(format!("unknown setting {other:?}"))),
            }
        }
        Ok(config)
    }

    /// True when a file it was built from changed since.
    pub fn changed(&self) -> bool {
        self.sources.iter().any(|(p, t)| modified(p) != *t)
    }

    /// Takes the files as they are now as seen (a change that did not
    /// read is not reported again until the next change).
    pub fn mark_seen(&mut self) {
        for (p, t) in &mut self.sources {
            *t = modified(p);
        }
    }
}

fn read_bounded(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| format!("cannot read: {e}"))?;
    let mut text = String::new();
    f.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read: {e}"))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("larger than {MAX_FILE_BYTES} bytes"));
    }
    Ok(text)
}

fn key_name(key: &Yaml) -> Result<&str, String> {
    key.as_str()
        .ok_or_else(|| format!("a key that is not a name: {key:?}"))
}

fn string<'a>(value: &'a Yaml, what: &str) -> Result<&'a str, String> {
    value
        .as_str()
        .ok_or_else(|| format!("{what}: not a string"))
}

fn mapping<'a>(value: &'a Yaml, what: &str) -> Result<Option<&'a yaml_rust2::yaml::Hash>, String> {
    match value {
        Yaml::Hash(h) => Ok(Some(h)),
        Yaml::Null => Ok(None),
        _ => Err(format!("{what}: not a mapping")),
    }
}

fn users(value: &Yaml) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (user, hash) in mapping(value, "basic_auth_users")?.into_iter().flatten() {
        let user = key_name(user)?;
        let hash = string(hash, &format!("basic_auth_users.{user}"))?;
        // Checked now, not at the first scrape: a hash bcrypt cannot read
        // would lock everyone out.
        bcrypt::verify("", hash).map_err(|e| {
            format!("basic_auth_users.{user}: not a bcrypt hash ({e}); make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`")
        })?;
        if user.contains(':') {
            return Err(format!(
                "basic_auth_users: {user:?} holds a colon, which basic authentication cannot carry"
            ));
        }
        out.push((user.to_string(), hash.to_string()));
    }
    Ok(out)
}

fn http_config(value: &Yaml) -> Result<Vec<(String, String)>, String> {
    let mut headers = Vec::new();
    for (key, v) in mapping(value, "http_server_config")?.into_iter().flatten() {
        match key_name(key)? {
            "headers" => {
                for (name, v) in mapping(v, "http_server_config.headers")?.into_iter().flatten() {
                    let name = key_name(name)?;
                    let Some(known) = SETTABLE_HEADERS
                        .iter()
                        .find(|h| h.eq_ignore_ascii_case(name))
                    else {
                        return Err(format!(
                            "http_server_config.headers: {name:?} cannot be set (only {})",
                            SETTABLE_HEADERS.join(", ")
                        ));
                    };
                    let v = string(v, &format!("http_server_config.headers.{name}"))?;
                    if v.contains(['\r', '\n']) {
                        return Err(format!(
                            "http_server_config.headers.{name}: a line break in the value"
                        ));
                    }
                    headers.push((known.to_string(), v.to_string()));
                }
            }
            // iosleuth speaks HTTP/1.1 only; saying so is allowed.
            "http2" if v.as_bool() == Some(false) => {}
            "http2" => {
                return Err(
                    "http_server_config.http2: iosleuth serves HTTP/1.1 only (set false or leave it out)"
                        .into(),
                )
            }
            other => return Err(format!("http_server_config: unknown setting {other:?}")),
        }
    }
    Ok(headers)
}

fn tls_version(value: &Yaml, what: &str) -> Result<u8, String> {
    match string(value, what)? {
        "TLS12" => Ok(12),
        "TLS13" => Ok(13),
        v @ ("TLS10" | "TLS11") => Err(format!(
            "{what}: {v} is not offered (rustls speaks TLS 1.2 and 1.3)"
        )),
        v => Err(format!("{what}: {v:?} is not TLS12 or TLS13")),
    }
}

/// PEM from a file (relative to the configuration's directory) or inline.
struct Pem {
    file: Option<PathBuf>,
    inline: Option<String>,
}

impl Pem {
    fn new() -> Pem {
        Pem {
            file: None,
            inline: None,
        }
    }

    fn bytes(
        &self,
        what: &str,
        sources: &mut Vec<(PathBuf, Option<SystemTime>)>,
    ) -> Result<Option<Vec<u8>>, String> {
        match (&self.file, &self.inline) {
            (Some(_), Some(_)) => Err(format!(
                "tls_server_config: both {what} and {what}_file; give one"
            )),
            (None, Some(text)) => Ok(Some(text.as_bytes().to_vec())),
            (Some(p), None) => {
                let meta = std::fs::metadata(p)
                    .map_err(|e| format!("{what}_file {}: {e}", p.display()))?;
                if meta.len() > MAX_FILE_BYTES {
                    return Err(format!("{what}_file {}: too large", p.display()));
                }
                let bytes =
                    std::fs::read(p).map_err(|e| format!("{what}_file {}: {e}", p.display()))?;
                sources.push((p.clone(), modified(p)));
                Ok(Some(bytes))
            }
            (None, None) => Ok(None),
        }
    }
}

fn tls_config(
    value: &Yaml,
    dir: &Path,
    sources: &mut Vec<(PathBuf, Option<SystemTime>)>,
) -> Result<Option<Arc<rustls::ServerConfig>>, String> {
    let Some(h) = mapping(value, "tls_server_config")? else {
        return Ok(None);
    };
    let (mut cert, mut key, mut client_ca) = (Pem::new(), Pem::new(), Pem::new());
    let mut client_auth = "NoClientCert".to_string();
    let (mut min, mut max) = (12, 13);
    for (k, v) in h {
        let name = key_name(k)?;
        let what = format!("tls_server_config.{name}");
        let path = |v: &Yaml| -> Result<Option<PathBuf>, String> {
            let s = string(v, &what)?;
            Ok((!s.is_empty()).then(|| dir.join(s)))
        };
        match name {
            "cert_file" => cert.file = path(v)?,
            "key_file" => key.file = path(v)?,
            "client_ca_file" => client_ca.file = path(v)?,
            "cert" => cert.inline = Some(string(v, &what)?.to_string()),
            "key" => key.inline = Some(string(v, &what)?.to_string()),
            "client_auth_type" => client_auth = string(v, &what)?.to_string(),
            "min_version" => min = tls_version(v, &what)?,
            "max_version" => max = tls_version(v, &what)?,
            "cipher_suites" | "curve_preferences" | "client_allowed_sans" => {
                return Err(format!(
                "{what} is not implemented by iosleuth (rustls' safe defaults apply); leave it out"
            ))
            }
            // rustls always prefers the server's order.
            "prefer_server_cipher_suites" => {}
            other => return Err(format!("tls_server_config: unknown setting {other:?}")),
        }
    }
    let cert = cert.bytes("cert", sources)?;
    let key = key.bytes("key", sources)?;
    let (Some(cert), Some(key)) = (cert, key) else {
        return Err(
            "tls_server_config: needs a certificate (cert_file) and its key (key_file)".into(),
        );
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("tls_server_config: the certificate is not PEM: {e}"))?;
    if chain.is_empty() {
        return Err("tls_server_config: no CERTIFICATE in the certificate's PEM".into());
    }
    let key = PrivateKeyDer::from_pem_slice(&key)
        .map_err(|e| format!("tls_server_config: no private key in the key's PEM: {e}"))?;
    if min > max {
        return Err("tls_server_config: min_version is above max_version".into());
    }
    let versions: Vec<&'static rustls::SupportedProtocolVersion> =
        [(12, &rustls::version::TLS12), (13, &rustls::version::TLS13)]
            .into_iter()
            .filter(|(v, _)| (min..=max).contains(v))
            .map(|(_, p)| p)
            .collect();
    let builder = rustls::ServerConfig::builder_with_protocol_versions(&versions);
    let builder = match client_auth.as_str() {
        "NoClientCert" => builder.with_no_client_auth(),
        "RequireAndVerifyClientCert" | "VerifyClientCertIfGiven" => {
            let Some(ca) = client_ca.bytes("client_ca", sources)? else {
                return Err(format!(
                    "tls_server_config: client_auth_type {client_auth} needs client_ca_file"
                ));
            };
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(&ca) {
                let c = c.map_err(|e| format!("tls_server_config.client_ca_file: {e}"))?;
                roots
                    .add(c)
                    .map_err(|e| format!("tls_server_config.client_ca_file: {e}"))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots));
            let verifier = if client_auth == "VerifyClientCertIfGiven" {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| format!("tls_server_config.client_ca_file: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        }
        other => {
            return Err(format!(
                "tls_server_config.client_auth_type: {other:?} is not NoClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert"
            ))
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("tls_server_config: the certificate and key: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Some(Arc::new(config)))
}

/// Checks `Authorization` headers against the users' bcrypt hashes.
/// bcrypt is slow on purpose (tens of ms at cost 10) and the server has one
/// thread: a password once verified is remembered, and the checks that
/// need bcrypt are rationed, so a stream of wrong passwords cannot keep a
/// scrape from being answered.
pub struct Auth {
    users: Vec<(String, String)>,
    /// Per user, the last password bcrypt accepted.
    verified: Vec<Option<Vec<u8>>>,
    /// bcrypt runs left in this second, and when the second began.
    budget: (u32, std::time::Instant),
}

/// bcrypt runs allowed a second.
const BCRYPT_PER_SECOND: u32 = 4;

#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    Denied,
    /// Too many checks needing bcrypt this second: answer 429.
    Busy,
}

impl Auth {
    pub fn new(users: Vec<(String, String)>) -> Auth {
        let verified = vec![None; users.len()];
        Auth {
            users,
            verified,
            budget: (BCRYPT_PER_SECOND, std::time::Instant::now()),
        }
    }

    pub fn required(&self) -> bool {
        !self.users.is_empty()
    }

    /// Judges an `Authorization` header's value (None: absent).
    pub fn check(&mut self, header: Option<&str>) -> Verdict {
        if !self.required() {
            return Verdict::Allowed;
        }
        let Some((user, password)) = header.and_then(basic_credentials) else {
            return Verdict::Denied;
        };
        let i = self.users.iter().position(|(u, _)| *u == user);
        if let Some(i) = i {
            if self.verified[i]
                .as_deref()
                .is_some_and(|p| same(p, password.as_bytes()))
            {
                return Verdict::Allowed;
            }
        }
        if self.budget.1.elapsed() >= std::time::Duration::from_secs(1) {
            self.budget = (BCRYPT_PER_SECOND, std::time::Instant::now());
        }
        if self.budget.0 == 0 {
            return Verdict::Busy;
        }
        self.budget.0 -= 1;
        // An unknown user is checked against the first user's hash: it
        // takes as long as a known one, so names cannot be probed by time.
        let hash = &self.users[i.unwrap_or(0)].1;
        let ok = bcrypt::verify(password.as_bytes(), hash).unwrap_or(false);
        match i {
            Some(i) if ok => {
                self.verified[i] = Some(password.into_bytes());
                Verdict::Allowed
            }
            _ => Verdict::Denied,
        }
    }
}

/// Equal bytes, compared in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `Basic BASE64(user:password)` → (user, password).
fn basic_credentials(value: &str) -> Option<(String, String)> {
    use base64::Engine;
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn basic(user: &str, password: &str) -> String {
        use base64::Engine;
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        )
    }

    #[test]
    fn an_empty_file_asks_for_nothing_and_unknown_settings_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let empty = write(dir.path(), "empty.yml", "");
        let c = WebConfig::load(&empty).unwrap();
        assert!(c.tls.is_none() && !c.auth.required());
        for (text, says) in [
            (
                "tls_server_config:\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
                "cipher_suites is not implemented",
            ),
            (
                "rate_limit:\n  interval: 1s\n",
                "rate_limit is not implemented",
            ),
            (
                "basic_auth_user:\n  alice: x\n",
                "unknown setting \"basic_auth_user\"",
            ),
            (
                "basic_auth_users:\n  alice: plaintext\n",
                "basic_auth_users.alice: not a bcrypt hash",
            ),
            (
                "tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n",
                "cert_file",
            ),
            (
                "tls_server_config:\n  min_version: TLS10\n",
                "TLS10 is not offered",
            ),
            ("http_server_config:\n  http2: true\n", "HTTP/1.1 only"),
            (
                "http_server_config:\n  headers:\n    Set-Cookie: a\n",
                "\"Set-Cookie\" cannot be set",
            ),
            ("- a\n- b\n", "not a mapping"),
            ("a: [\n", "not YAML"),
        ] {
            let p = write(dir.path(), "bad.yml", text);
            let e = WebConfig::load(&p).unwrap_err();
            assert!(e.starts_with(&p.display().to_string()), "{e}");
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn basic_auth_accepts_the_users_password_and_rations_bcrypt() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let mut auth = Auth::new(vec![("alice".into(), hash)]);
        assert_eq!(auth.check(None), Verdict::Denied);
        assert_eq!(auth.check(Some("Bearer x")), Verdict::Denied);
        assert_eq!(
            auth.check(Some(&basic("alice", "s3cret"))),
            Verdict::Allowed
        );
        assert_eq!(auth.check(Some(&basic("alice", "wrong"))), Verdict::Denied);
        assert_eq!(auth.check(Some(&basic("bob", "s3cret"))), Verdict::Denied);
        // Two bcrypt runs left in this second (one for alice, one wrong,
        // one for bob so far), then the budget is out.
        assert_eq!(auth.check(Some(&basic("alice", "no"))), Verdict::Denied);
        assert_eq!(auth.check(Some(&basic("alice", "no"))), Verdict::Busy);
        // The verified password needs no bcrypt run.
        assert_eq!(
            auth.check(Some(&basic("alice", "s3cret"))),
            Verdict::Allowed
        );
        assert_eq!(
            Auth::new(Vec::new()).check(None),
            Verdict::Allowed,
            "without users, no authentication"
        );
        assert_eq!(
            basic_credentials("basic YTpiOmM="),
            Some(("a".into(), "b:c".into()))
        );
    }
}
