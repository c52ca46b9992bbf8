//! CSRF protection for the actions: a random session cookie (HttpOnly,
//! SameSite=Strict) and, in each form, a token that is the HMAC-SHA256 of
//! that cookie under a secret this process drew at start. A POST must carry
//! both and they must agree, and an Origin that is one of the dashboard's
//! own (src/access.rs).

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub const COOKIE: &str = "rq_session";

pub struct Csrf {
    secret: [u8; 32],
}

fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).expect("the OS random source");
    bytes
}

impl Csrf {
    pub fn new() -> Csrf {
        Csrf { secret: random() }
    }

    /// A new session id for the cookie.
    pub fn new_session(&self) -> String {
        hex::encode(random::<16>())
    }

    fn mac(&self, session: &str) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC takes any key");
        mac.update(session.as_bytes());
        mac
    }

    /// The token a form of this session carries.
    pub fn token(&self, session: &str) -> String {
        hex::encode(self.mac(session).finalize().into_bytes())
    }

    /// Whether `token` is this session's (compared in constant time).
    pub fn verify(&self, session: &str, token: &str) -> bool {
        match hex::decode(token) {
            Ok(bytes) => self.mac(session).verify_slice(&bytes).is_ok(),
            Err(_) => false,
        }
    }
}

/// The session id in a Cookie header, if any.
pub fn session_of(cookie_header: Option<&str>) -> Option<String> {
    cookie_header?
        .split(';')
        .map(str::trim)
        .find_map(|c| c.strip_prefix(COOKIE).and_then(|v| v.strip_prefix('=')))
        .filter(|v| v.len() == 32 && v.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_holds_for_its_session_only() {
        let csrf = Csrf::new();
        let (a, b) = (csrf.new_session(), csrf.new_session());
        assert!(csrf.verify(&a, &csrf.token(&a)));
        assert!(!csrf.verify(&b, &csrf.token(&a)));
        assert!(!csrf.verify(&a, "zz"));
        assert!(!Csrf::new().verify(&a, &csrf.token(&a)), "another process's secret");
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let id = "0123456789abcdef0123456789abcdef";
        assert_eq!(session_of(Some(&format!("a=1; rq_session={id}; b=2"))), Some(id.to_string()));
        assert_eq!(session_of(Some("rq_session=<script>")), None);
        assert_eq!(session_of(None), None);
    }
}
