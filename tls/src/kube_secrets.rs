//! The certificate Secrets through the Kubernetes API, for processes started without
//! certificate files: the operator issues and renews keda-rs' Secrets ([`Issuer`]), the
//! metrics-apiserver and the activators read theirs and follow its changes
//! ([`ClientMaterial::from_secret`]).
//!
//! Polling, as for files: one GET per Secret every `--cert-reload-interval` (10 s by default)
//! needs only `get` on the named Secrets, and sees a renewal within one interval.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::identity::Identity;
use crate::pki::{CertificateAuthority, PkiError};
use crate::secrets::{AuthorityPlan, PlanError, TlsSecret, plan_authority, plan_identity};
use crate::{CertStore, ServerCaVerifier, TlsError, certified_key, server_verifier};

/// Why a certificate Secret could not be read or written. Messages name the Secret and, for a
/// refusal, the permission to grant.
#[derive(Debug, thiserror::Error)]
pub enum SecretApiError {
    /// The API server refused (403): the service account lacks the permission.
    #[error(
        "no permission to {verb} Secret {namespace}/{name} (grant the service account {verb} on it): {message}"
    )]
    Forbidden {
        /// `get`, `create` or `update`.
        verb: &'static str,
        /// The Secret's namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The API server's message.
        message: String,
    },
    /// Any other failure of the request.
    #[error("cannot {verb} Secret {namespace}/{name}: {source}")]
    Api {
        /// `get`, `create` or `update`.
        verb: &'static str,
        /// The Secret's namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The CA in `keda-rs-certs` cannot be used.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A certificate could not be issued.
    #[error(transparent)]
    Issue(#[from] PkiError),
    /// The Secret's material is not usable.
    #[error(transparent)]
    Material(#[from] TlsError),
}

impl SecretApiError {
    /// Whether the API server refused for lack of permission.
    pub fn is_forbidden(&self) -> bool {
        matches!(self, Self::Forbidden { .. })
    }

    /// Whether a write lost a race with another writer (and should be planned again).
    fn is_conflict(&self) -> bool {
        matches!(self, Self::Api { source: kube::Error::Api(status), .. } if status.code == 409)
    }
}

/// The Secrets of one namespace, with errors that name them.
#[derive(Clone)]
struct Secrets {
    api: Api<Secret>,
    namespace: String,
}

impl Secrets {
    fn new(client: kube::Client, namespace: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
        }
    }

    fn error(&self, verb: &'static str, name: &str, source: kube::Error) -> SecretApiError {
        let (namespace, name) = (self.namespace.clone(), name.to_string());
        match source {
            kube::Error::Api(status) if status.code == 403 => SecretApiError::Forbidden {
                verb,
                namespace,
                name,
                message: status.message.clone(),
            },
            source => SecretApiError::Api {
                verb,
                namespace,
                name,
                source,
            },
        }
    }

    async fn get(&self, name: &str) -> Result<Option<Secret>, SecretApiError> {
        self.api
            .get_opt(name)
            .await
            .map_err(|e| self.error("get", name, e))
    }

    /// Creates `secret` (`create`) or replaces it (its resourceVersion guards the update).
    async fn write(&self, secret: &Secret, create: bool) -> Result<Secret, SecretApiError> {
        let name = secret.metadata.name.clone().unwrap_or_default();
        let params = PostParams::default();
        if create {
            self.api
                .create(&params, secret)
                .await
                .map_err(|e| self.error("create", &name, e))
        } else {
            self.api
                .replace(&name, &params, secret)
                .await
                .map_err(|e| self.error("update", &name, e))
        }
    }
}

/// The operator's side: keeps keda-rs' three Secrets in its namespace current.
#[derive(Clone)]
pub struct Issuer {
    secrets: Secrets,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer")
            .field("namespace", &self.secrets.namespace)
            .finish_non_exhaustive()
    }
}

impl Issuer {
    /// An issuer of the Secrets in `namespace`.
    pub fn new(client: kube::Client, namespace: &str) -> Self {
        Self {
            secrets: Secrets::new(client, namespace),
        }
    }

    /// Brings the Secrets up to date at `now` and returns the operator's material (`keda-rs-certs`):
    /// creates them with a fresh CA when `keda-rs-certs` does not exist, renews what is due
    /// ([`plan_authority`], [`plan_identity`]), and leaves them alone when `keda-rs-certs` has
    /// no CA key (someone else manages them). Each write is logged with its reason. A write that
    /// loses a race with another writer (409) is planned again from what that writer wrote.
    ///
    /// # Errors
    /// [`SecretApiError`]; [`SecretApiError::is_forbidden`] when the service account may not
    /// read or write them.
    pub async fn ensure(&self, now: jiff::Timestamp) -> Result<TlsSecret, SecretApiError> {
        let mut attempt = 0;
        loop {
            match self.ensure_once(now).await {
                Err(error) if error.is_conflict() && attempt < 3 => attempt += 1,
                outcome => return outcome,
            }
        }
    }

    async fn ensure_once(&self, now: jiff::Timestamp) -> Result<TlsSecret, SecretApiError> {
        let namespace = &self.secrets.namespace;
        let name = Identity::Operator.secret_name();
        let existing = self.secrets.get(name).await?;
        let (operator, authority) = match (
            plan_authority(existing.as_ref(), namespace, now)?,
            existing,
        ) {
            (AuthorityPlan::Unmanaged, Some(secret)) => {
                return Ok(TlsSecret::from_secret(&secret)?);
            }
            (AuthorityPlan::Keep(authority), Some(secret)) => (secret, authority),
            // plan_authority plans a creation for an absent Secret, never a use of it.
            (AuthorityPlan::Unmanaged | AuthorityPlan::Keep(_), None) => {
                return Err(SecretApiError::Material(TlsError::Certificate {
                    what: format!("Secret {namespace}/{name}"),
                    reason: "it does not exist".to_string(),
                }));
            }
            (
                AuthorityPlan::Write {
                    authority,
                    secret,
                    create,
                    reason,
                },
                _,
            ) => {
                let written = self.secrets.write(&secret, create).await?;
                info!(secret = %format!("{namespace}/{name}"), %reason, "certificate Secret written");
                (written, authority)
            }
        };
        for identity in [Identity::MetricsApiserver, Identity::Activator] {
            let existing = self.secrets.get(identity.secret_name()).await?;
            if let Some((secret, reason)) =
                plan_identity(identity, &authority, namespace, existing.as_ref(), now)?
            {
                self.secrets.write(&secret, existing.is_none()).await?;
                info!(
                    secret = %format!("{namespace}/{}", identity.secret_name()),
                    %reason,
                    "certificate Secret written"
                );
            }
        }
        Ok(TlsSecret::from_secret(&operator)?)
    }
}

/// A client's certificate and the CA it trusts the operator by, read from its Secret and
/// replaced when the Secret changes. Until the Secret exists they are a placeholder no peer
/// accepts, so connections fail (and are retried) rather than the process.
#[derive(Debug, Clone)]
pub struct ClientMaterial {
    /// The client certificate and key (`tls.crt`, `tls.key`).
    pub cert: Arc<CertStore>,
    /// The CA the operator's serving certificate must chain to (`ca.crt`).
    pub ca: Arc<ServerCaVerifier>,
}

impl ClientMaterial {
    /// Material from `secret`.
    ///
    /// # Errors
    /// [`TlsError`] naming the Secret and its key.
    pub fn of(secret: &TlsSecret) -> Result<Self, TlsError> {
        Ok(Self {
            cert: Arc::new(CertStore::new(secret.certified_key()?)),
            ca: Arc::new(ServerCaVerifier::from_pem(&secret.ca, &secret.ca_name())?),
        })
    }

    /// A certificate and CA of a throwaway CA that no keda-rs process trusts or is trusted by.
    ///
    /// # Errors
    /// [`PkiError`] when generating them fails.
    pub fn placeholder() -> Result<Self, PkiError> {
        let ca = CertificateAuthority::new("keda-rs-placeholder")?;
        let pair = ca.issue_client("keda-rs-placeholder")?;
        let key = certified_key(pair.cert.as_bytes(), pair.key.as_bytes(), "placeholder")?;
        Ok(Self {
            cert: Arc::new(CertStore::new(key)),
            ca: Arc::new(ServerCaVerifier::from_pem(
                ca.cert_pem().as_bytes(),
                "placeholder",
            )?),
        })
    }

    /// Uses `secret` from the next handshake on; nothing changes when it does not load.
    ///
    /// # Errors
    /// [`TlsError`] naming the Secret and its key.
    pub fn replace(&self, secret: &TlsSecret) -> Result<(), TlsError> {
        let key = secret.certified_key()?;
        let ca = server_verifier(&secret.ca, &secret.ca_name())?;
        self.cert.replace(key);
        self.ca.replace(ca);
        Ok(())
    }

    /// The material of `identity`'s Secret in `namespace`, followed every `interval` until
    /// `cancel`: a changed Secret is used by the next handshakes, one that does not load is
    /// logged and the previous material kept. A Secret that does not exist yet (the operator
    /// creates it when it starts) or cannot be read for a moment gives the placeholder until
    /// it can, with one warning.
    ///
    /// # Errors
    /// [`SecretApiError::Forbidden`] when the service account may not read the Secret (nothing
    /// would ever change that without a restart), or its material is unusable at start.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub async fn from_secret(
        client: kube::Client,
        namespace: &str,
        identity: Identity,
        interval: Duration,
        cancel: CancellationToken,
    ) -> Result<Self, SecretApiError> {
        let secrets = Secrets::new(client, namespace);
        let name = identity.secret_name();
        let what = format!("{namespace}/{name}");
        let (material, mut seen) = match secrets.get(name).await {
            Ok(Some(secret)) => {
                let tls = TlsSecret::from_secret(&secret)?;
                info!(secret = %what, "using the certificate of the Secret");
                (Self::of(&tls)?, Some(tls))
            }
            Err(error) if error.is_forbidden() => return Err(error),
            outcome => {
                let why = match outcome {
                    Err(error) => error.to_string(),
                    _ => format!("Secret {what} does not exist yet (the operator creates it)"),
                };
                warn!(secret = %what, reason = %why, "no certificate yet: connections to the operator fail until the Secret can be read");
                (Self::placeholder()?, None)
            }
        };
        let this = material.clone();
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker.tick().await;
            let mut failing = false;
            loop {
                tokio::select! {
                    () = cancel.cancelled() => return,
                    _ = ticker.tick() => {}
                }
                let secret = match secrets.get(name).await {
                    Ok(Some(secret)) => secret,
                    Ok(None) => continue,
                    Err(error) => {
                        if !failing {
                            warn!(secret = %what, %error, "cannot read the certificate Secret; keeping the current certificate");
                        }
                        failing = true;
                        continue;
                    }
                };
                failing = false;
                let tls = match TlsSecret::from_secret(&secret) {
                    Ok(tls) => tls,
                    Err(error) => {
                        if seen.is_some() {
                            warn!(secret = %what, %error, "certificate Secret changed but cannot be loaded; keeping the previous certificate");
                        }
                        continue;
                    }
                };
                if seen.as_ref() == Some(&tls) {
                    continue;
                }
                match this.replace(&tls) {
                    Ok(()) => info!(secret = %what, "certificate Secret changed; reloaded"),
                    Err(error) => {
                        warn!(secret = %what, %error, "certificate Secret changed but cannot be loaded; keeping the previous certificate")
                    }
                }
                seen = Some(tls);
            }
        });
        Ok(material)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::{CA_KEY, TLS_CERT};
    use memkube::{FailureRule, MemKube, Verb};

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::now()
    }

    fn server() -> MemKube {
        let server = MemKube::new();
        server.create_namespace("keda").expect("namespace");
        server
    }

    async fn secret(server: &MemKube, name: &str) -> Option<Secret> {
        Api::<Secret>::namespaced(server.client(), "keda")
            .get_opt(name)
            .await
            .expect("get")
    }

    fn version(secret: &Option<Secret>) -> Option<String> {
        secret
            .as_ref()
            .and_then(|s| s.metadata.resource_version.clone())
    }

    #[tokio::test]
    async fn the_issuer_creates_the_three_secrets_once_and_then_leaves_them_alone() {
        let server = server();
        let issuer = Issuer::new(server.client(), "keda");
        let material = issuer.ensure(now()).await.expect("ensure");
        material
            .certified_key()
            .expect("a usable serving certificate");
        let mut versions = Vec::new();
        for identity in Identity::ALL {
            let secret = secret(&server, identity.secret_name()).await;
            assert!(secret.is_some(), "{identity}'s Secret exists");
            versions.push(version(&secret));
        }
        assert!(
            secret(&server, "keda-rs-certs")
                .await
                .and_then(|s| s.data)
                .is_some_and(|d| d.contains_key(CA_KEY)),
            "keda-rs-certs holds the CA key"
        );
        let again = issuer.ensure(now()).await.expect("ensure");
        assert_eq!(again, material);
        for (identity, before) in Identity::ALL.into_iter().zip(versions) {
            assert_eq!(
                version(&secret(&server, identity.secret_name()).await),
                before,
                "{identity}'s Secret is not rewritten"
            );
        }
    }

    #[tokio::test]
    async fn a_deleted_client_secret_is_issued_again() {
        let server = server();
        let issuer = Issuer::new(server.client(), "keda");
        issuer.ensure(now()).await.expect("ensure");
        let name = Identity::Activator.secret_name();
        Api::<Secret>::namespaced(server.client(), "keda")
            .delete(name, &Default::default())
            .await
            .expect("delete");
        issuer.ensure(now()).await.expect("ensure");
        assert!(secret(&server, name).await.is_some());
    }

    #[tokio::test]
    async fn without_permission_the_issuer_says_which_permission_is_missing() {
        let server = server();
        server.inject_failure(FailureRule::new(403).resource("secrets").verb(Verb::Create));
        let error = Issuer::new(server.client(), "keda")
            .ensure(now())
            .await
            .expect_err("forbidden");
        assert!(error.is_forbidden(), "{error}");
        assert!(
            error.to_string().starts_with(
                "no permission to create Secret keda/keda-rs-certs (grant the service account create on it)"
            ),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_client_follows_its_secret_from_absent_to_issued_to_renewed() {
        let server = server();
        let cancel = CancellationToken::new();
        let material = ClientMaterial::from_secret(
            server.client(),
            "keda",
            Identity::Activator,
            Duration::from_millis(50),
            cancel.clone(),
        )
        .await
        .expect("absent is not an error");
        let placeholder = material.cert.current().cert[0].clone();
        let issuer = Issuer::new(server.client(), "keda");
        issuer.ensure(now()).await.expect("ensure");
        let issued = secret(&server, Identity::Activator.secret_name())
            .await
            .expect("issued");
        let issued_cert = issued.data.as_ref().expect("data")[TLS_CERT].0.clone();
        let changed = |before: &rustls_pki_types::CertificateDer<'static>| {
            let material = material.clone();
            let before = before.clone();
            async move {
                tokio::time::timeout(Duration::from_secs(10), async {
                    while material.cert.current().cert[0] == before {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                })
                .await
                .expect("the change is followed")
            }
        };
        changed(&placeholder).await;
        let loaded = material.cert.current().cert[0].clone();
        assert_eq!(
            crate::certificates(&issued_cert, "issued").expect("PEM")[0],
            loaded
        );
        // Renewal, a year on: the client picks the new certificate up.
        let later = now()
            .checked_add(jiff::SignedDuration::from_hours(300 * 24))
            .expect("in range");
        issuer.ensure(later).await.expect("renew");
        changed(&loaded).await;
        cancel.cancel();
    }

    #[tokio::test]
    async fn a_client_without_permission_to_read_its_secret_is_told_so() {
        let server = server();
        server.inject_failure(FailureRule::new(403).resource("secrets"));
        let error = ClientMaterial::from_secret(
            server.client(),
            "keda",
            Identity::MetricsApiserver,
            Duration::from_secs(10),
            CancellationToken::new(),
        )
        .await
        .expect_err("forbidden");
        assert!(
            error
                .to_string()
                .starts_with("no permission to get Secret keda/keda-rs-metrics-apiserver-certs"),
            "{error}"
        );
    }
}
