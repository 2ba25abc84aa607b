//! rustls configurations for mutual TLS with reloadable certificates and CAs.

use std::sync::Arc;

use rustls::client::Resumption;
use rustls::server::NoServerSessionStorage;
use rustls::{ClientConfig, ServerConfig};

use crate::{CertStore, ClientCaVerifier, ServerCaVerifier, provider};

/// A server configuration that serves the certificate of `serving` and requires client
/// certificates chaining to the CA of `client_ca`; both are read per handshake, so replacing
/// them (or reloading their files) takes effect for the next connection. No ALPN protocols
/// are set.
///
/// Session resumption is off: a resumed session is not verified again, so a client whose
/// certificate the current CA no longer accepts could otherwise resume a session from before
/// the change. The callers keep connections open for long (one HTTP/2 connection, one report
/// stream), so a full handshake per connection costs nothing that matters.
///
/// # Errors
/// rustls refuses the protocol versions (does not happen with the ring provider).
pub fn mutual_tls_server_config(
    serving: Arc<CertStore>,
    client_ca: Arc<ClientCaVerifier>,
) -> Result<ServerConfig, rustls::Error> {
    mutual_tls_server_config_with(serving, client_ca, &crate::policy::service_policy())
}

/// [`mutual_tls_server_config`] with the versions and suites of `policy` instead of the
/// process-wide service policy ([`crate::policy::install_service_policy`]).
///
/// # Errors
/// rustls refuses the protocol versions (does not happen with the ring provider).
pub fn mutual_tls_server_config_with(
    serving: Arc<CertStore>,
    client_ca: Arc<ClientCaVerifier>,
    policy: &crate::TlsPolicy,
) -> Result<ServerConfig, rustls::Error> {
    let mut config = ServerConfig::builder_with_provider(policy.provider())
        .with_protocol_versions(policy.versions())?
        .with_client_cert_verifier(client_ca)
        .with_cert_resolver(serving);
    config.session_storage = Arc::new(NoServerSessionStorage {});
    config.send_tls13_tickets = 0;
    Ok(config)
}

/// A client configuration that trusts servers whose certificate chains to the CA of
/// `server_ca` and presents the certificate of `client_cert`; both are read per handshake. No
/// ALPN protocols are set; session resumption is off, for the reason given at
/// [`mutual_tls_server_config`].
///
/// # Errors
/// rustls refuses the protocol versions (does not happen with the ring provider).
pub fn mutual_tls_client_config(
    server_ca: Arc<ServerCaVerifier>,
    client_cert: Arc<CertStore>,
) -> Result<ClientConfig, rustls::Error> {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(server_ca)
        .with_client_cert_resolver(client_cert);
    config.resumption = Resumption::disabled();
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_pki::Ca;
    use crate::{certified_key, client_verifier};
    use rcgen::ExtendedKeyUsagePurpose;
    use rustls::{ClientConnection, ServerConnection};
    use rustls_pki_types::ServerName;

    /// A full exchange between `client` and `server` in memory: the handshake, then whatever
    /// either side sends after it (TLS 1.3 session tickets, the server's verdict on the client
    /// certificate).
    fn connect(client: &Arc<ClientConfig>, server: &Arc<ServerConfig>) -> Result<(), String> {
        let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
        let mut c = ClientConnection::new(Arc::clone(client), name).map_err(|e| e.to_string())?;
        let mut s = ServerConnection::new(Arc::clone(server)).map_err(|e| e.to_string())?;
        for _ in 0..10 {
            let mut progressed = false;
            while c.wants_write() {
                let mut bytes = Vec::new();
                c.write_tls(&mut bytes).map_err(|e| e.to_string())?;
                s.read_tls(&mut bytes.as_slice())
                    .map_err(|e| e.to_string())?;
                s.process_new_packets()
                    .map_err(|e| format!("server: {e}"))?;
                progressed = true;
            }
            while s.wants_write() {
                let mut bytes = Vec::new();
                s.write_tls(&mut bytes).map_err(|e| e.to_string())?;
                c.read_tls(&mut bytes.as_slice())
                    .map_err(|e| e.to_string())?;
                c.process_new_packets()
                    .map_err(|e| format!("client: {e}"))?;
                progressed = true;
            }
            if !progressed {
                break;
            }
        }
        if c.is_handshaking() || s.is_handshaking() {
            return Err("the handshake did not complete".to_string());
        }
        Ok(())
    }

    fn store(pair: &(String, String)) -> Arc<CertStore> {
        Arc::new(CertStore::new(
            certified_key(pair.0.as_bytes(), pair.1.as_bytes(), "test").expect("loads"),
        ))
    }

    #[test]
    fn a_service_policy_of_tls13_refuses_a_tls12_only_client() {
        let ca = Ca::new("ca");
        let serving = store(&ca.issue(&["localhost"], ExtendedKeyUsagePurpose::ServerAuth));
        let client_ca =
            Arc::new(ClientCaVerifier::from_pem(ca.pem().as_bytes(), "ca").expect("CA"));
        let tls13 =
            crate::TlsPolicy::parse("KEDA_SERVICE_MIN_TLS_VERSION", Some("TLS13"), "L", None)
                .expect("policy");
        let strict = Arc::new(
            mutual_tls_server_config_with(Arc::clone(&serving), Arc::clone(&client_ca), &tls13)
                .expect("server"),
        );
        let default = Arc::new(
            mutual_tls_server_config_with(serving, client_ca, &crate::TlsPolicy::default())
                .expect("server"),
        );
        let tls12_client = Arc::new(
            ClientConfig::builder_with_provider(provider())
                .with_protocol_versions(&[&rustls::version::TLS12])
                .expect("versions")
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(
                    ServerCaVerifier::from_pem(ca.pem().as_bytes(), "ca").expect("CA"),
                ))
                .with_client_cert_resolver(store(
                    &ca.issue(&[], ExtendedKeyUsagePurpose::ClientAuth),
                )),
        );
        assert_eq!(connect(&tls12_client, &default), Ok(()));
        assert!(connect(&tls12_client, &strict).is_err());
    }

    #[test]
    fn every_connection_is_verified_against_the_current_cas_and_certificates() {
        let (old, new) = (Ca::new("old"), Ca::new("new"));
        let serving = store(&old.issue(&["localhost"], ExtendedKeyUsagePurpose::ServerAuth));
        let client_ca =
            Arc::new(ClientCaVerifier::from_pem(old.pem().as_bytes(), "old").expect("CA"));
        let server = Arc::new(
            mutual_tls_server_config(Arc::clone(&serving), Arc::clone(&client_ca)).expect("server"),
        );
        let old_client = Arc::new(
            mutual_tls_client_config(
                Arc::new(ServerCaVerifier::from_pem(old.pem().as_bytes(), "old").expect("CA")),
                store(&old.issue(&[], ExtendedKeyUsagePurpose::ClientAuth)),
            )
            .expect("client"),
        );
        let new_client = Arc::new(
            mutual_tls_client_config(
                Arc::new(ServerCaVerifier::from_pem(new.pem().as_bytes(), "new").expect("CA")),
                store(&new.issue(&[], ExtendedKeyUsagePurpose::ClientAuth)),
            )
            .expect("client"),
        );
        // Trusts either serving certificate, presents one of the old client CA.
        let both = format!("{}{}", old.pem(), new.pem());
        let old_cert_client = Arc::new(
            mutual_tls_client_config(
                Arc::new(ServerCaVerifier::from_pem(both.as_bytes(), "both").expect("CA")),
                store(&old.issue(&[], ExtendedKeyUsagePurpose::ClientAuth)),
            )
            .expect("client"),
        );
        assert_eq!(connect(&old_client, &server), Ok(()));
        assert_eq!(connect(&old_cert_client, &server), Ok(()));
        assert_eq!(connect(&old_cert_client, &server), Ok(()), "twice");
        assert!(connect(&new_client, &server).is_err());

        // Rotation to the new CA: a new serving certificate and a new client CA.
        let (cert, key) = new.issue(&["localhost"], ExtendedKeyUsagePurpose::ServerAuth);
        serving.replace(certified_key(cert.as_bytes(), key.as_bytes(), "new").expect("loads"));
        client_ca.replace(client_verifier(new.pem().as_bytes(), "new").expect("CA"));
        assert_eq!(connect(&new_client, &server), Ok(()));
        assert!(connect(&old_client, &server).is_err());
        // Its earlier sessions are not resumed, which would skip the check of its certificate.
        let refused = connect(&old_cert_client, &server).expect_err("old client certificate");
        assert!(refused.starts_with("server: "), "{refused}");
    }
}
