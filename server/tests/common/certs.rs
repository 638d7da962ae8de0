//! Test certificates, made at run time (no key is committed): a CA and a
//! server certificate for `localhost` and 127.0.0.1 signed by it, as PEM
//! files in a directory.
#![allow(dead_code)]

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use std::path::{Path, PathBuf};

/// The files: `ca.pem`, `cert.pem`, `key.pem`.
pub struct Certs {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Writes a fresh CA and server certificate into `dir`.
pub fn make(dir: &Path) -> Certs {
    let ca_key = KeyPair::generate().expect("ca key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("ca");
    let key = KeyPair::generate().expect("key");
    let params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .expect("params");
    let cert = params.signed_by(&key, &ca, &ca_key).expect("cert");
    let certs = Certs {
        ca: dir.join("ca.pem"),
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
    };
    std::fs::write(&certs.ca, ca.pem()).expect("write ca");
    std::fs::write(&certs.cert, cert.pem()).expect("write cert");
    std::fs::write(&certs.key, key.serialize_pem()).expect("write key");
    certs
}
