//! [`Tls`]: mutual TLS between a cluster's processes and their clients (rustls).
//!
//! TensorFlow's servers speak plaintext gRPC to anyone who connects (its
//! `SECURITY.md` says to run them only on trusted networks). With a `Tls`, a
//! server accepts only TLS connections whose client presents a certificate that
//! the cluster's CA signed, and its own calls to peers verify the peer's
//! certificate against the same CA and present its own: every task holds a
//! certificate and key signed by one CA, and so does every client that opens
//! sessions. Certificates name the host a peer is reached at (a DNS name or an
//! IP address in the subject alternative names), as the cluster spec writes it.

use std::path::Path;

use graph::{Result, Status};
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

/// A process's TLS identity and the CA it trusts; see the module docs.
#[derive(Clone)]
pub struct Tls {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    ca_pem: Vec<u8>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Tls")
            .field("cert_pem", &format_args!("{} bytes", self.cert_pem.len()))
            .field("ca_pem", &format_args!("{} bytes", self.ca_pem.len()))
            .finish_non_exhaustive()
    }
}

/// `InvalidArgument` naming `what` unless `pem` is PEM text holding a block
/// labelled one of `want`.
fn check_pem(pem: &[u8], what: &str, want: &[&str]) -> Result<()> {
    let text = std::str::from_utf8(pem)
        .map_err(|_| Status::invalid_argument(format!("TLS {what}: not a PEM file (not text)")))?;
    let mut found = false;
    for line in text.lines() {
        if let Some(label) = line
            .trim()
            .strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"))
        {
            found |= want.contains(&label);
        }
    }
    if found {
        Ok(())
    } else {
        Err(Status::invalid_argument(format!(
            "TLS {what}: no PEM block labelled {} found",
            want.join(" or ")
        )))
    }
}

/// The file at `path`, checked by [`check_pem`]; errors name the file.
fn load(path: &Path, what: &str, want: &[&str]) -> Result<Vec<u8>> {
    let pem = std::fs::read(path).map_err(|e| {
        let msg = format!("cannot read TLS {what} {}: {e}", path.display());
        if e.kind() == std::io::ErrorKind::NotFound {
            Status::not_found(msg)
        } else {
            Status::invalid_argument(msg)
        }
    })?;
    check_pem(&pem, what, want)
        .map_err(|s| Status::invalid_argument(format!("{}: {}", path.display(), s.message())))?;
    Ok(pem)
}

const CERT: &[&str] = &["CERTIFICATE"];
const KEY: &[&str] = &["PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY"];

impl Tls {
    /// A process presenting `cert_pem` (its certificate chain) with `key_pem`,
    /// trusting peers signed by `ca_pem`. `InvalidArgument` when a part is not
    /// the PEM it should be.
    pub fn from_pem(
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
        ca_pem: impl Into<Vec<u8>>,
    ) -> Result<Tls> {
        let tls = Tls {
            cert_pem: cert_pem.into(),
            key_pem: key_pem.into(),
            ca_pem: ca_pem.into(),
        };
        check_pem(&tls.cert_pem, "certificate", CERT)?;
        check_pem(&tls.key_pem, "key", KEY)?;
        check_pem(&tls.ca_pem, "CA certificate", CERT)?;
        Ok(tls)
    }

    /// [`Tls::from_pem`] of three files (`--tls-cert`, `--tls-key`,
    /// `--tls-ca`); `NotFound` or `InvalidArgument` naming the file.
    pub fn from_files(cert: &Path, key: &Path, ca: &Path) -> Result<Tls> {
        Ok(Tls {
            cert_pem: load(cert, "certificate", CERT)?,
            key_pem: load(key, "key", KEY)?,
            ca_pem: load(ca, "CA certificate", CERT)?,
        })
    }

    fn identity(&self) -> Identity {
        Identity::from_pem(&self.cert_pem, &self.key_pem)
    }

    fn ca(&self) -> Certificate {
        Certificate::from_pem(&self.ca_pem)
    }

    /// The server side: this identity, client certificates required and
    /// verified against the CA.
    pub(crate) fn server(&self) -> ServerTlsConfig {
        ServerTlsConfig::new()
            .identity(self.identity())
            .client_ca_root(self.ca())
            .client_auth_optional(false)
    }

    /// The client side: the peer verified against the CA, this identity
    /// presented.
    pub(crate) fn client(&self) -> ClientTlsConfig {
        ClientTlsConfig::new()
            .ca_certificate(self.ca())
            .identity(self.identity())
    }
}

/// A TLS setup error as a status (`InvalidArgument`: a certificate or key the
/// TLS library refused).
pub(crate) fn setup_error(e: impl std::fmt::Display) -> Status {
    Status::invalid_argument(format!("TLS configuration: {e}"))
}
