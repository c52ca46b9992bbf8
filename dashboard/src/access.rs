//! Who the dashboard answers, checked before any page is made:
//!
//! 1. The Host: a request addressed to a name the dashboard does not serve
//!    is refused (421) with no data. A page on another site whose name the
//!    attacker re-points at 127.0.0.1 (DNS rebinding) is same-origin with
//!    itself, so the browser lets it read the answers; only the Host it
//!    sends gives it away. Checked before the password, so that such a page
//!    cannot even make the browser ask for it.
//! 2. The password (HTTP Basic), when one is set, compared in constant time.
//! 3. For a POST, the Origin: one of the dashboard's own (pages.rs), on top
//!    of the CSRF token.
//!
//! And the headers every answer carries, errors and the stylesheet too.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use subtle::ConstantTimeEq;

pub struct Access {
    /// the authorities (host[:port], lower case) a request may be addressed to
    hosts: BTreeSet<String>,
    /// whether browsers reach the pages over https (own TLS or a proxy's)
    https: bool,
    /// SHA-256 of "user:password": both sides hashed, so that the comparison
    /// takes the same time whatever the lengths
    credentials: Option<[u8; 32]>,
}

/// `NAME`, `NAME:PORT`, `[IPv6]` or `[IPv6]:PORT` as a Host header holds
/// it, lower case.
fn authority(text: &str) -> Result<String, String> {
    let bad = || format!("--allowed-host {text}: expected NAME or NAME:PORT (an IPv6 address in brackets: [::1]:8432)");
    let lower = text.trim().to_ascii_lowercase();
    let (host, port) = match lower.strip_prefix('[') {
        Some(rest) => {
            let (ip, after) = rest.split_once(']').ok_or_else(bad)?;
            ip.parse::<Ipv6Addr>().map_err(|_| bad())?;
            let port = if after.is_empty() { None } else { Some(after.strip_prefix(':').ok_or_else(bad)?) };
            (format!("[{ip}]"), port)
        }
        None => {
            let (host, port) = match lower.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (lower.as_str(), None),
            };
            if host.is_empty() || !host.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.') {
                return Err(bad());
            }
            (host.to_string(), port)
        }
    };
    match port {
        None => Ok(host),
        Some(port) => port.parse::<u16>().map(|port| format!("{host}:{port}")).map_err(|_| bad()),
    }
}

impl Access {
    pub fn new(address: SocketAddr, allowed: &[String], https: bool, credentials: Option<(String, String)>) -> Result<Access, String> {
        let port = address.port();
        let mut hosts = BTreeSet::new();
        // browsers leave the scheme's own port out of Host and Origin
        let default_port = if https { 443 } else { 80 };
        let mut add = |host: String| {
            if port == default_port {
                hosts.insert(host.clone());
            }
            hosts.insert(format!("{host}:{port}"));
        };
        match address.ip() {
            ip if ip.is_unspecified() => {}
            IpAddr::V4(ip) => add(ip.to_string()),
            IpAddr::V6(ip) => add(format!("[{ip}]")),
        }
        // loopback is reachable by these names; with an unspecified address
        // (0.0.0.0) it is reachable through loopback too
        if address.ip().is_loopback() || address.ip().is_unspecified() {
            for name in ["localhost", "127.0.0.1", "[::1]"] {
                add(name.to_string());
            }
        }
        for name in allowed {
            hosts.insert(authority(name)?);
        }
        let credentials = credentials.map(|(user, password)| Sha256::digest(format!("{user}:{password}")).into());
        Ok(Access { hosts, https, credentials })
    }

    pub fn https(&self) -> bool {
        self.https
    }

    pub fn has_password(&self) -> bool {
        self.credentials.is_some()
    }

    pub fn hosts(&self) -> Vec<String> {
        self.hosts.iter().cloned().collect()
    }

    fn host_allowed(&self, request: &Request) -> bool {
        // HTTP/1.1 sends Host; HTTP/2 (over TLS) the :authority, which
        // becomes the URI's
        let host = match request.headers().get(header::HOST) {
            Some(value) => value.to_str().ok().map(str::to_ascii_lowercase),
            None => request.uri().authority().map(|a| a.as_str().to_ascii_lowercase()),
        };
        host.is_some_and(|h| self.hosts.contains(&h))
    }

    /// Whether a POST's Origin is one of the dashboard's own. Browsers send
    /// one with every POST; a request without one is not from a browser
    /// page, and is refused too (the forms always come with one).
    pub fn origin_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else { return false };
        let scheme = if self.https { "https://" } else { "http://" };
        origin.strip_prefix(scheme).is_some_and(|host| self.hosts.contains(&host.to_ascii_lowercase()))
    }

    fn authenticated(&self, headers: &HeaderMap) -> bool {
        let Some(expected) = &self.credentials else { return true };
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Basic ").or_else(|| v.strip_prefix("basic ")))
            .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64.trim()).ok());
        match given {
            Some(bytes) => Sha256::digest(&bytes).as_slice().ct_eq(expected).into(),
            None => false,
        }
    }
}

/// The Host and the password, before any route.
pub async fn check(State(access): State<Arc<crate::App>>, request: Request, next: Next) -> Response {
    let access = &access.access;
    if !access.host_allowed(&request) {
        return (
            StatusCode::MISDIRECTED_REQUEST,
            "This dashboard does not answer to that host name. Use the address it listens on, or start it with --allowed-host NAME.\n",
        )
            .into_response();
    }
    if !access.authenticated(request.headers()) {
        let mut response = (StatusCode::UNAUTHORIZED, "This dashboard needs its user name and password.\n").into_response();
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"raquel dashboard\", charset=\"UTF-8\""));
        return response;
    }
    next.run(request).await
}

/// The headers of every answer: no script and nothing from elsewhere, no
/// framing (the CSP's frame-ancestors and, for older browsers,
/// X-Frame-Options), no content sniffing, no Referer sent from the pages
/// (the confirmation page sets its own: see pages.rs), and nothing kept in
/// a cache (the pages hold payloads).
pub async fn headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        h.entry(name).or_insert(HeaderValue::from_static(value));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(bind: &str, allowed: &[&str]) -> Access {
        let allowed: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
        Access::new(bind.parse().unwrap(), &allowed, false, None).unwrap()
    }

    #[test]
    fn the_names_served() {
        let a = access("127.0.0.1:8432", &["Dash.Example.com", "proxy:8443"]);
        assert_eq!(
            a.hosts(),
            ["127.0.0.1:8432", "[::1]:8432", "dash.example.com", "localhost:8432", "proxy:8443"]
        );
        let v6 = access("[::1]:9000", &[]);
        assert!(v6.hosts().contains(&"[::1]:9000".to_string()));
        let lan = access("10.0.0.5:80", &[]);
        assert_eq!(lan.hosts(), ["10.0.0.5", "10.0.0.5:80"]);
        assert!(Access::new("127.0.0.1:1".parse().unwrap(), &["a/b".into()], false, None).is_err());
        assert!(Access::new("127.0.0.1:1".parse().unwrap(), &["a:99999".into()], false, None).is_err());
    }

    #[test]
    fn origins() {
        let a = access("127.0.0.1:8432", &[]);
        let with = |origin: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::ORIGIN, origin.parse().unwrap());
            h
        };
        assert!(a.origin_allowed(&with("http://127.0.0.1:8432")));
        assert!(a.origin_allowed(&with("http://localhost:8432")));
        assert!(!a.origin_allowed(&with("https://127.0.0.1:8432")));
        assert!(!a.origin_allowed(&with("http://rebind.evil.example:8432")));
        assert!(!a.origin_allowed(&with("null")));
        assert!(!a.origin_allowed(&HeaderMap::new()));
    }

    #[test]
    fn credentials() {
        let a = Access::new("127.0.0.1:1".parse().unwrap(), &[], false, Some(("u".into(), "p w".into()))).unwrap();
        let with = |value: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, value.parse().unwrap());
            h
        };
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        assert!(a.authenticated(&with(&format!("Basic {}", b64("u:p w")))));
        assert!(!a.authenticated(&with(&format!("Basic {}", b64("u:p")))));
        assert!(!a.authenticated(&with(&format!("Basic {}", b64("v:p w")))));
        assert!(!a.authenticated(&with("Basic !!!")));
        assert!(!a.authenticated(&HeaderMap::new()));
    }
}
