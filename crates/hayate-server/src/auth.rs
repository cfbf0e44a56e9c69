//! Password checks of the startup: PostgreSQL's MD5 challenge and SCRAM-SHA-256 (RFC 5802
//! and 7677, without channel binding), from the password in the server's config.
//!
//! SCRAM in four messages:
//! 1. client-first `n,,n=user,r=<client nonce>`;
//! 2. server-first `r=<client nonce><server nonce>,s=<salt>,i=<iterations>`;
//! 3. client-final `c=biws,r=<nonce>,p=<proof>`: the proof is ClientKey XOR
//!    HMAC(StoredKey, AuthMessage), checked by H(proof XOR signature) == StoredKey;
//! 4. server-final `v=<HMAC(ServerKey, AuthMessage)>`, which proves the server knew the
//!    password too.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

pub const SCRAM_ITERATIONS: u32 = 4096;

/// The answer PostgreSQL's MD5 method expects: `md5` + hex(md5(hex(md5(password || user))
/// || salt)).
pub fn md5_response(user: &str, password: &str, salt: &[u8; 4]) -> String {
    let inner = format!("{:x}", md5::compute(format!("{password}{user}")));
    let mut outer = inner.into_bytes();
    outer.extend_from_slice(salt);
    format!("md5{:x}", md5::compute(outer))
}

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// PBKDF2-HMAC-SHA-256 with one output block (SCRAM's Hi).
fn salted_password(password: &str, salt: &[u8], iterations: u32) -> [u8; 32] {
    let mut block = salt.to_vec();
    block.extend_from_slice(&1u32.to_be_bytes());
    let mut u = hmac(password.as_bytes(), &block);
    let mut out = u;
    for _ in 1..iterations {
        u = hmac(password.as_bytes(), &u);
        for (o, b) in out.iter_mut().zip(u) {
            *o ^= b;
        }
    }
    out
}

/// The server side of one SCRAM-SHA-256 exchange.
pub struct Scram {
    salted: [u8; 32],
    client_first_bare: String,
    server_first: String,
    nonce: String,
    gs2_header: String,
}

/// Why a SCRAM exchange failed: a malformed message (protocol violation) or a wrong
/// password.
#[derive(Debug, PartialEq, Eq)]
pub enum ScramError {
    Malformed(String),
    WrongPassword,
}

impl Scram {
    /// Takes the client-first message; returns the exchange and the server-first message.
    pub fn start(
        password: &str,
        client_first: &[u8],
        salt: &[u8],
        server_nonce: &str,
    ) -> Result<(Scram, String), ScramError> {
        let malformed =
            |what: &str| ScramError::Malformed(format!("malformed SCRAM message: {what}"));
        let text = std::str::from_utf8(client_first).map_err(|_| malformed("not UTF-8"))?;
        // gs2-header: a channel binding flag ("n" or "y"; "p=..." asks for binding, which
        // is not offered), an empty authzid, then the bare message.
        let mut parts = text.splitn(3, ',');
        let flag = parts.next().unwrap_or_default();
        let authzid = parts.next().ok_or_else(|| malformed("no gs2 header"))?;
        let bare = parts.next().ok_or_else(|| malformed("no gs2 header"))?;
        if flag.starts_with("p=") {
            return Err(malformed("channel binding is not supported"));
        }
        if flag != "n" && flag != "y" {
            return Err(malformed("bad channel binding flag"));
        }
        let client_nonce = bare
            .split(',')
            .find_map(|attribute| attribute.strip_prefix("r="))
            .filter(|nonce| !nonce.is_empty())
            .ok_or_else(|| malformed("no nonce"))?;
        let nonce = format!("{client_nonce}{server_nonce}");
        let server_first = format!("r={nonce},s={},i={SCRAM_ITERATIONS}", BASE64.encode(salt));
        let scram = Scram {
            salted: salted_password(password, salt, SCRAM_ITERATIONS),
            client_first_bare: bare.to_string(),
            server_first: server_first.clone(),
            nonce,
            gs2_header: format!("{flag},{authzid},"),
        };
        Ok((scram, server_first))
    }

    /// Checks the client-final message; returns the server-final message.
    pub fn finish(&self, client_final: &[u8]) -> Result<String, ScramError> {
        let malformed =
            |what: &str| ScramError::Malformed(format!("malformed SCRAM message: {what}"));
        let text = std::str::from_utf8(client_final).map_err(|_| malformed("not UTF-8"))?;
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or_else(|| malformed("no proof"))?;
        let attribute = |name: &str| {
            without_proof
                .split(',')
                .find_map(|part| part.strip_prefix(name))
        };
        let binding = attribute("c=").ok_or_else(|| malformed("no channel binding"))?;
        if BASE64.decode(binding).ok().as_deref() != Some(self.gs2_header.as_bytes()) {
            return Err(malformed("channel binding does not match"));
        }
        if attribute("r=") != Some(self.nonce.as_str()) {
            return Err(malformed("nonce does not match"));
        }
        let proof = BASE64
            .decode(proof)
            .map_err(|_| malformed("proof is not base64"))?;
        if proof.len() != 32 {
            return Err(malformed("proof has the wrong length"));
        }
        let auth_message = format!(
            "{},{},{without_proof}",
            self.client_first_bare, self.server_first
        );
        let client_key = hmac(&self.salted, b"Client Key");
        let stored_key: [u8; 32] = Sha256::digest(client_key).into();
        let signature = hmac(&stored_key, auth_message.as_bytes());
        let recovered: Vec<u8> = proof.iter().zip(signature).map(|(p, s)| p ^ s).collect();
        let recovered_stored: [u8; 32] = Sha256::digest(&recovered).into();
        if recovered_stored != stored_key {
            return Err(ScramError::WrongPassword);
        }
        let server_key = hmac(&self.salted, b"Server Key");
        let server_signature = hmac(&server_key, auth_message.as_bytes());
        Ok(format!("v={}", BASE64.encode(server_signature)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_matches_postgresql() {
        // PostgreSQL stores md5(password || user): "md5" + md5("secretalice").
        let inner = format!("{:x}", md5::compute("secretalice"));
        let mut outer = inner.into_bytes();
        outer.extend_from_slice(&[1, 2, 3, 4]);
        let expected = format!("md5{:x}", md5::compute(outer));
        assert_eq!(md5_response("alice", "secret", &[1, 2, 3, 4]), expected);
        assert_ne!(md5_response("alice", "wrong", &[1, 2, 3, 4]), expected);
    }

    /// RFC 7677's example exchange (user "user", password "pencil").
    #[test]
    fn scram_follows_rfc_7677() {
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let client_first = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
        let (scram, server_first) = Scram::start(
            "pencil",
            client_first,
            &salt,
            "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        )
        .unwrap();
        // RFC 7677 uses i=4096, as this server does.
        assert_eq!(
            server_first,
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        );
        let client_final = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
        assert_eq!(
            scram.finish(client_final).unwrap(),
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
        let (wrong, _) = Scram::start(
            "pencils",
            client_first,
            &salt,
            "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        )
        .unwrap();
        assert_eq!(wrong.finish(client_final), Err(ScramError::WrongPassword));
        assert!(matches!(
            scram.finish(b"c=biws,r=other,p=AAAA"),
            Err(ScramError::Malformed(_))
        ));
    }
}
