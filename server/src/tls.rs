//! The TLS settings of every HTTPS call this binary makes: the operator CLI's requests and notify
//! hooks. Trust comes from the Mozilla root set compiled into the binary (webpki-roots), so a fresh
//! machine or a scratch container needs no CA bundle and nothing on the host can widen what a hook
//! trusts. The CLI may add a private CA (`--ca-cert`), since self-hosted servers often sit behind
//! an internal one.
//!
//! Why a config of our own rather than reqwest's default: reqwest 0.13 reads the system store on
//! every client it builds, and the hook sender builds one client per call (its address pinning is
//! per call); the public-roots config here is built once and cloned.
//!
//! Must never: switch off certificate or host name verification, or trust a CA nobody named.

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use std::sync::{Arc, LazyLock};

/// Most certificates read from one `--ca-cert` file (a bundle of a few intermediates and roots).
const CA_FILE_CERTIFICATES_MAX: usize = 64;

/// The client config for public endpoints: webpki roots only. Built once per process.
pub fn public_roots() -> Result<rustls::ClientConfig, String> {
    static PUBLIC: LazyLock<Result<rustls::ClientConfig, String>> = LazyLock::new(|| client_config(&[]));
    PUBLIC.clone()
}

/// The client config trusting the webpki roots plus `extra_roots` (a private CA's certificates).
pub fn client_config(extra_roots: &[CertificateDer<'static>]) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    for certificate in extra_roots {
        roots.add(certificate.clone()).map_err(|e| format!("not a usable CA certificate ({e})"))?;
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS versions unavailable ({e})"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    // The client speaks HTTP/1.1 only (reqwest is built without http2).
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The certificates in a PEM file (`-----BEGIN CERTIFICATE-----` blocks); at least one.
pub fn read_pem_certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let mut certificates = Vec::new();
    for certificate in CertificateDer::pem_slice_iter(pem) {
        certificates.push(certificate.map_err(|e| format!("not a PEM certificate file ({e})"))?);
        if certificates.len() > CA_FILE_CERTIFICATES_MAX {
            return Err(format!("holds more than {CA_FILE_CERTIFICATES_MAX} certificates"));
        }
    }
    if certificates.is_empty() {
        return Err("holds no PEM certificate (-----BEGIN CERTIFICATE-----)".to_string());
    }
    Ok(certificates)
}

/// The TLS failure behind a transport error, if any, as rustls words it (e.g. "invalid peer
/// certificate: UnknownIssuer"). rustls errors travel inside `std::io::Error`s (hyper-rustls wraps
/// tokio-rustls's in another), and `io::Error::source()` skips the error it wraps, so each I/O
/// error is opened by hand.
pub fn tls_problem(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    const CAUSES_MAX: usize = 32;
    let mut cause = Some(error);
    for _ in 0..CAUSES_MAX {
        let current = cause?;
        if let Some(tls) = current.downcast_ref::<rustls::Error>() {
            return Some(tls.to_string());
        }
        cause = match current.downcast_ref::<std::io::Error>().and_then(std::io::Error::get_ref) {
            Some(wrapped) => Some(wrapped as &(dyn std::error::Error + 'static)),
            None => current.source(),
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_config_trusts_the_compiled_in_roots_and_speaks_http1() {
        let config = public_roots().unwrap();
        assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
        assert!(config.enable_sni, "the server name must travel in the handshake");
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        assert!(read_pem_certificates(b"").unwrap_err().contains("no PEM certificate"));
        assert!(read_pem_certificates(b"hello").unwrap_err().contains("no PEM certificate"));
        let garbage = b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
        assert!(read_pem_certificates(garbage).is_err());
    }

    #[test]
    fn a_tls_error_is_found_inside_io_errors() {
        let tls = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, tls);
        let outer = std::io::Error::other(io);
        let problem = tls_problem(&outer).unwrap();
        assert!(problem.contains("UnknownIssuer"), "{problem}");
        assert_eq!(tls_problem(&std::io::Error::other("plain")), None);
    }
}
