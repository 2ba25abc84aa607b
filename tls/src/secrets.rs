//! The Secrets that hold keda-rs' certificates, and when they must be (re)issued.
//!
//! Each [`Identity`] has its own Secret in keda-rs' namespace, shaped as `kubernetes.io/tls`
//! (what cert-manager writes too): `tls.crt` and `tls.key` (its certificate and key) and
//! `ca.crt` (the CA bundle peers are verified against). The operator's, `keda-rs-certs`, also
//! holds `ca.key` when keda-rs manages the CA: the operator then issues and renews all three
//! ([`plan_authority`], [`plan_identity`]). One Secret per identity, because Kubernetes grants
//! access to a Secret as a whole: the activators may read theirs without being able to read the
//! metrics-apiserver's key or the CA's.
//!
//! The functions here are pure (time is passed in); the operator does the reading and writing.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rustls::sign::CertifiedKey;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use crate::identity::{CertificateFacts, Identity};
use crate::pki::{CA_COMMON_NAME, CertificateAuthority, LEAF_VALIDITY_DAYS, PemPair, PkiError};
use crate::{TlsError, certificates, certified_key, client_verifier, server_verifier};

/// `ca.crt`: the CA bundle (PEM) peers are verified against.
pub const CA_CERT: &str = "ca.crt";
/// `ca.key`: the CA's private key (PEM), only in the operator's Secret when keda-rs manages it.
pub const CA_KEY: &str = "ca.key";
/// `tls.crt`: the certificate (PEM).
pub const TLS_CERT: &str = "tls.crt";
/// `tls.key`: its private key (PEM).
pub const TLS_KEY: &str = "tls.key";
/// The Secrets' type.
pub const SECRET_TYPE: &str = "kubernetes.io/tls";

/// A certificate is reissued when less than this remains of it (as KEDA's rotation does, with
/// cert-controller's 90-day look-ahead).
pub const LEAF_RENEW_BEFORE_DAYS: i64 = 90;

/// The CA is replaced when less than this remains of it, so no certificate it issues outlives it.
pub const CA_RENEW_BEFORE_DAYS: i64 = LEAF_VALIDITY_DAYS + LEAF_RENEW_BEFORE_DAYS;

const SECONDS_PER_DAY: i64 = 24 * 60 * 60;

/// The TLS material of one Secret, read as bytes; parsed by the methods, whose errors name the
/// Secret and the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSecret {
    /// `Secret <namespace>/<name>`, for messages.
    pub what: String,
    /// `ca.crt`.
    pub ca: Vec<u8>,
    /// `tls.crt`.
    pub cert: Vec<u8>,
    /// `tls.key`.
    pub key: Vec<u8>,
    /// `ca.key`, when present.
    pub ca_key: Option<Vec<u8>>,
}

impl TlsSecret {
    /// The material of `secret`.
    ///
    /// # Errors
    /// [`TlsError::Certificate`] naming the Secret and the missing key.
    pub fn from_secret(secret: &Secret) -> Result<Self, TlsError> {
        let what = secret_name(secret);
        let data = secret.data.as_ref();
        let get = |key: &str| data.and_then(|d| d.get(key)).map(|b| b.0.clone());
        let required = |key: &str| {
            get(key).ok_or_else(|| TlsError::Certificate {
                what: what.clone(),
                reason: format!("it has no {key}"),
            })
        };
        Ok(Self {
            ca: required(CA_CERT)?,
            cert: required(TLS_CERT)?,
            key: required(TLS_KEY)?,
            ca_key: get(CA_KEY),
            what: what.clone(),
        })
    }

    /// `tls.crt` with `tls.key`, to serve or to present.
    ///
    /// # Errors
    /// [`TlsError`] naming the Secret's keys.
    pub fn certified_key(&self) -> Result<CertifiedKey, TlsError> {
        certified_key(
            &self.cert,
            &self.key,
            &format!("{} ({TLS_CERT} / {TLS_KEY})", self.what),
        )
    }

    /// What this material is called in messages about `ca.crt`.
    pub fn ca_name(&self) -> String {
        format!("{} ({CA_CERT})", self.what)
    }
}

/// `Secret <namespace>/<name>`.
fn secret_name(secret: &Secret) -> String {
    format!(
        "Secret {}/{}",
        secret.metadata.namespace.as_deref().unwrap_or_default(),
        secret.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The Secret of `identity` in `namespace` holding `pair` and the CA bundle `bundle` (and the
/// CA key, for the operator's), built on `base` (the existing Secret, whose other keys, labels
/// and resourceVersion are kept) or new.
pub fn identity_secret(
    identity: Identity,
    namespace: &str,
    bundle: &str,
    pair: &PemPair,
    ca_key: Option<&str>,
    base: Option<&Secret>,
) -> Secret {
    let mut secret = base.cloned().unwrap_or_else(|| Secret {
        metadata: ObjectMeta {
            name: Some(identity.secret_name().to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([
                (
                    "app.kubernetes.io/part-of".to_string(),
                    "keda-rs".to_string(),
                ),
                (
                    "app.kubernetes.io/component".to_string(),
                    identity.common_name().to_string(),
                ),
            ])),
            ..ObjectMeta::default()
        },
        type_: Some(SECRET_TYPE.to_string()),
        ..Secret::default()
    });
    let data = secret.data.get_or_insert_with(BTreeMap::new);
    let mut put = |key: &str, value: &str| {
        data.insert(key.to_string(), ByteString(value.as_bytes().to_vec()));
    };
    put(CA_CERT, bundle);
    put(TLS_CERT, &pair.cert);
    put(TLS_KEY, &pair.key);
    if let Some(ca_key) = ca_key {
        put(CA_KEY, ca_key);
    }
    secret.string_data = None;
    secret
}

/// The three Secrets of a fresh CA for keda-rs in `namespace`, the operator's first (with the
/// CA key): what the operator creates on a new cluster and `keda-rs-certs` prints.
///
/// # Errors
/// [`PkiError`].
pub fn fresh_secrets(namespace: &str, now: jiff::Timestamp) -> Result<Vec<Secret>, PkiError> {
    let ca = CertificateAuthority::new_at(CA_COMMON_NAME, now)?;
    let bundle = ca.cert_pem();
    let ca_key = ca.key_pem();
    Identity::ALL
        .into_iter()
        .map(|identity| {
            let pair = issue(&ca, identity, namespace, now)?;
            let ca_key = (identity == Identity::Operator).then_some(ca_key.as_str());
            Ok(identity_secret(
                identity, namespace, &bundle, &pair, ca_key, None,
            ))
        })
        .collect()
}

fn issue(
    ca: &CertificateAuthority,
    identity: Identity,
    namespace: &str,
    now: jiff::Timestamp,
) -> Result<PemPair, PkiError> {
    let hosts = identity.hosts(namespace);
    let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
    ca.issue(identity.common_name(), &hosts, identity.usages(), now)
}

/// The CA keda-rs manages: its current certificate and key, and the bundle every Secret
/// carries as `ca.crt` (the current CA first, then earlier CAs until they expire).
#[derive(Debug)]
pub struct Authority {
    /// The current CA.
    pub ca: CertificateAuthority,
    /// The PEM bundle.
    pub bundle: String,
}

/// What to do with the operator's Secret, `keda-rs-certs`.
#[derive(Debug)]
pub enum AuthorityPlan {
    /// It holds no CA key: someone else (cert-manager, `keda-rs-certs` without `ca.key`, a
    /// user) manages the certificates; use it as it is.
    Unmanaged,
    /// It is current.
    Keep(Authority),
    /// Write `secret` (create it when `create`), then use `authority`.
    Write {
        /// The CA after the write.
        authority: Authority,
        /// The Secret to write.
        secret: Box<Secret>,
        /// Create (it does not exist) rather than replace.
        create: bool,
        /// Why, for the log.
        reason: String,
    },
}

/// Why the CA of `keda-rs-certs` cannot be used to issue certificates.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The CA certificate or key does not load.
    #[error("{what} holds {CA_KEY} but the CA cannot be loaded from it and {CA_CERT}: {source}")]
    Ca {
        /// The Secret.
        what: String,
        /// The cause.
        #[source]
        source: PkiError,
    },
    /// Issuing a certificate failed.
    #[error(transparent)]
    Issue(#[from] PkiError),
}

/// Decides about the operator's Secret `existing` (`None`: it does not exist) at `now`:
/// created with a fresh CA when absent; left alone without a CA key; otherwise renewed when its
/// certificate is unusable, expires within [`LEAF_RENEW_BEFORE_DAYS`], names other hosts or is
/// not signed by the current CA. A CA within [`CA_RENEW_BEFORE_DAYS`] of its end is replaced by
/// a new one in two steps, so no connection fails on the way: first the bundle gains the new CA
/// (first) while the serving certificate stays, so every process trusts both; at the next
/// check the serving certificate is reissued by the new CA (it is then "not signed by the
/// current CA").
///
/// # Errors
/// [`PlanError`] when the Secret's CA cannot be loaded or a certificate cannot be issued.
pub fn plan_authority(
    existing: Option<&Secret>,
    namespace: &str,
    now: jiff::Timestamp,
) -> Result<AuthorityPlan, PlanError> {
    let Some(existing) = existing else {
        let ca = CertificateAuthority::new_at(CA_COMMON_NAME, now)?;
        let bundle = ca.cert_pem();
        let pair = issue(&ca, Identity::Operator, namespace, now)?;
        let secret = identity_secret(
            Identity::Operator,
            namespace,
            &bundle,
            &pair,
            Some(&ca.key_pem()),
            None,
        );
        return Ok(AuthorityPlan::Write {
            authority: Authority { ca, bundle },
            secret: Box::new(secret),
            create: true,
            reason: "it does not exist".to_string(),
        });
    };
    let what = secret_name(existing);
    let data = existing.data.as_ref();
    let text = |key: &str| {
        data.and_then(|d| d.get(key))
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
    };
    let Some(ca_key) = text(CA_KEY) else {
        return Ok(AuthorityPlan::Unmanaged);
    };
    let ca_pem = text(CA_CERT).unwrap_or_default();
    let ca = CertificateAuthority::from_pem(&ca_pem, &ca_key, &format!("{what} ({CA_CERT})"))
        .map_err(|source| PlanError::Ca {
            what: what.clone(),
            source,
        })?;
    let ca_ends = end_of(&ca.cert_pem()).unwrap_or(i64::MIN);
    if remaining(ca_ends, now) < CA_RENEW_BEFORE_DAYS * SECONDS_PER_DAY {
        let fresh = CertificateAuthority::new_at(CA_COMMON_NAME, now)?;
        let bundle = bundle_of(&fresh.cert_pem(), &ca_pem, now);
        // The serving certificate stays for now (see above); the CA key becomes the new one.
        let pair = PemPair {
            cert: text(TLS_CERT).unwrap_or_default(),
            key: text(TLS_KEY).unwrap_or_default(),
        };
        let secret = identity_secret(
            Identity::Operator,
            namespace,
            &bundle,
            &pair,
            Some(&fresh.key_pem()),
            Some(existing),
        );
        return Ok(AuthorityPlan::Write {
            authority: Authority { ca: fresh, bundle },
            secret: Box::new(secret),
            create: false,
            reason: format!("its CA ends at {}", at(ca_ends)),
        });
    }
    let bundle = bundle_of(&ca.cert_pem(), &ca_pem, now);
    let problem = leaf_problem(
        Identity::Operator,
        &ca,
        namespace,
        &text(TLS_CERT).unwrap_or_default(),
        &text(TLS_KEY).unwrap_or_default(),
        now,
    )
    .or_else(|| (bundle != ca_pem).then(|| "its CA bundle holds an expired CA".to_string()));
    let authority = Authority { ca, bundle };
    match problem {
        None => Ok(AuthorityPlan::Keep(authority)),
        Some(reason) => {
            let pair = issue(&authority.ca, Identity::Operator, namespace, now)?;
            let secret = identity_secret(
                Identity::Operator,
                namespace,
                &authority.bundle,
                &pair,
                Some(&ca_key),
                Some(existing),
            );
            Ok(AuthorityPlan::Write {
                authority,
                secret: Box::new(secret),
                create: false,
                reason,
            })
        }
    }
}

/// What to write for the Secret of `identity` (the metrics-apiserver's or the activators'),
/// `existing` (`None`: absent), so that it holds a current certificate of `authority` and its
/// bundle; `None` when it is current. The reason is for the log.
///
/// # Errors
/// [`PkiError`] when a certificate cannot be issued.
pub fn plan_identity(
    identity: Identity,
    authority: &Authority,
    namespace: &str,
    existing: Option<&Secret>,
    now: jiff::Timestamp,
) -> Result<Option<(Secret, String)>, PkiError> {
    let reason = match existing {
        None => Some("it does not exist".to_string()),
        Some(secret) => {
            let text = |key: &str| {
                secret
                    .data
                    .as_ref()
                    .and_then(|d| d.get(key))
                    .map(|b| String::from_utf8_lossy(&b.0).into_owned())
                    .unwrap_or_default()
            };
            if text(CA_CERT) != authority.bundle {
                Some("its CA bundle is not the current one".to_string())
            } else {
                leaf_problem(
                    identity,
                    &authority.ca,
                    namespace,
                    &text(TLS_CERT),
                    &text(TLS_KEY),
                    now,
                )
            }
        }
    };
    let Some(reason) = reason else {
        return Ok(None);
    };
    let pair = issue(&authority.ca, identity, namespace, now)?;
    let secret = identity_secret(
        identity,
        namespace,
        &authority.bundle,
        &pair,
        None,
        existing,
    );
    Ok(Some((secret, reason)))
}

/// Why the certificate `cert` / `key` is not a current one of `identity` issued by `ca`, if
/// it is not.
fn leaf_problem(
    identity: Identity,
    ca: &CertificateAuthority,
    namespace: &str,
    cert: &str,
    key: &str,
    now: jiff::Timestamp,
) -> Option<String> {
    if let Err(error) = certified_key(cert.as_bytes(), key.as_bytes(), "the certificate") {
        return Some(format!("{TLS_CERT} / {TLS_KEY} cannot be used: {error}"));
    }
    let der = certificates(cert.as_bytes(), TLS_CERT)
        .ok()?
        .into_iter()
        .next()?;
    let Some(facts) = CertificateFacts::of(&der) else {
        return Some(format!("{TLS_CERT} does not parse"));
    };
    if facts.common_name.as_deref() != Some(identity.common_name()) {
        return Some(format!(
            "its common name is {:?}, not {:?}",
            facts.common_name.unwrap_or_default(),
            identity.common_name()
        ));
    }
    let mut hosts = identity.hosts(namespace);
    hosts.sort();
    if facts.hosts != hosts {
        return Some(format!("it names {:?}, not {:?}", facts.hosts, hosts));
    }
    if remaining(facts.not_after, now) < LEAF_RENEW_BEFORE_DAYS * SECONDS_PER_DAY {
        return Some(format!("it ends at {}", at(facts.not_after)));
    }
    if !signed_by(identity, &der, ca, now) {
        return Some("it is not signed by the current CA".to_string());
    }
    None
}

/// Whether `der` verifies against `ca` alone for `identity`'s use at `now`.
fn signed_by(
    identity: Identity,
    der: &CertificateDer<'_>,
    ca: &CertificateAuthority,
    now: jiff::Timestamp,
) -> bool {
    let pem = ca.cert_pem();
    let Ok(seconds) = u64::try_from(now.as_second()) else {
        return false;
    };
    let now = UnixTime::since_unix_epoch(Duration::from_secs(seconds));
    if identity
        .usages()
        .contains(&rcgen::ExtendedKeyUsagePurpose::ClientAuth)
    {
        client_verifier(pem.as_bytes(), "CA")
            .is_ok_and(|v| v.verify_client_cert(der, &[], now).is_ok())
    } else {
        let Some(name) = identity
            .hosts("")
            .into_iter()
            .next()
            .and_then(|h| ServerName::try_from(h).ok())
        else {
            return false;
        };
        server_verifier(pem.as_bytes(), "CA").is_ok_and(|v| {
            use rustls::client::danger::ServerCertVerifier as _;
            v.verify_server_cert(der, &[], &name, &[], now).is_ok()
        })
    }
}

/// `current` first, then the certificates of `previous` that are neither `current` nor
/// expired at `now`.
fn bundle_of(current: &str, previous: &str, now: jiff::Timestamp) -> String {
    let mut bundle = current.to_string();
    let current_der = certificates(current.as_bytes(), CA_CERT)
        .ok()
        .and_then(|c| c.into_iter().next());
    for der in certificates(previous.as_bytes(), CA_CERT).unwrap_or_default() {
        let expired = CertificateFacts::of(&der).is_none_or(|f| f.not_after <= now.as_second());
        if Some(&der) != current_der.as_ref() && !expired {
            bundle.push_str(&crate::pki::pem_of(&der));
        }
    }
    bundle
}

/// The end of validity of the first certificate of `pem`.
fn end_of(pem: &str) -> Option<i64> {
    let der = certificates(pem.as_bytes(), CA_CERT)
        .ok()?
        .into_iter()
        .next()?;
    CertificateFacts::of(&der).map(|f| f.not_after)
}

/// Seconds from `now` until `end` (negative when past).
fn remaining(end: i64, now: jiff::Timestamp) -> i64 {
    end.saturating_sub(now.as_second())
}

/// A Unix time as RFC 3339, for messages.
fn at(seconds: i64) -> String {
    jiff::Timestamp::from_second(seconds).map_or_else(|_| seconds.to_string(), |t| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> jiff::Timestamp {
        "2030-01-10T08:00:00Z".parse().expect("timestamp")
    }

    fn days_later(days: i64) -> jiff::Timestamp {
        now()
            .checked_add(jiff::SignedDuration::from_hours(days * 24))
            .expect("in range")
    }

    fn written(plan: AuthorityPlan) -> (Authority, Secret, bool, String) {
        match plan {
            AuthorityPlan::Write {
                authority,
                secret,
                create,
                reason,
            } => (authority, *secret, create, reason),
            other => panic!("expected a write, got {other:?}"),
        }
    }

    fn kept(plan: AuthorityPlan) -> Authority {
        match plan {
            AuthorityPlan::Keep(authority) => authority,
            other => panic!("expected keep, got {other:?}"),
        }
    }

    fn data(secret: &Secret, key: &str) -> String {
        String::from_utf8_lossy(&secret.data.as_ref().expect("data")[key].0).into_owned()
    }

    #[test]
    fn a_missing_operator_secret_is_created_with_a_fresh_ca_and_then_kept() {
        let (authority, secret, create, _) =
            written(plan_authority(None, "keda", now()).expect("plan"));
        assert!(create);
        assert_eq!(secret.type_.as_deref(), Some(SECRET_TYPE));
        assert_eq!(secret.metadata.name.as_deref(), Some("keda-rs-certs"));
        assert_eq!(data(&secret, CA_CERT), authority.bundle);
        assert!(secret.data.as_ref().expect("data").contains_key(CA_KEY));
        let material = TlsSecret::from_secret(&secret).expect("complete");
        material.certified_key().expect("usable");
        // A month later nothing is due.
        kept(plan_authority(Some(&secret), "keda", days_later(30)).expect("plan"));
    }

    #[test]
    fn a_secret_without_a_ca_key_is_not_managed() {
        let (_, mut secret, _, _) = written(plan_authority(None, "keda", now()).expect("plan"));
        secret.data.as_mut().expect("data").remove(CA_KEY);
        assert!(matches!(
            plan_authority(Some(&secret), "keda", days_later(400)).expect("plan"),
            AuthorityPlan::Unmanaged
        ));
    }

    #[test]
    fn the_serving_certificate_is_renewed_90_days_before_its_end_with_the_same_ca() {
        let (first, secret, _, _) = written(plan_authority(None, "keda", now()).expect("plan"));
        // Issued for 365 days: day 274 is more than 90 days before the end, day 276 is not.
        kept(plan_authority(Some(&secret), "keda", days_later(274)).expect("plan"));
        let (renewed, rewritten, create, reason) =
            written(plan_authority(Some(&secret), "keda", days_later(276)).expect("plan"));
        assert!(!create);
        assert!(reason.starts_with("it ends at "), "{reason}");
        assert_eq!(renewed.bundle, first.bundle, "same CA");
        assert_ne!(data(&rewritten, TLS_CERT), data(&secret, TLS_CERT));
    }

    #[test]
    fn a_serving_certificate_for_another_namespace_is_reissued() {
        let (_, secret, _, _) = written(plan_authority(None, "keda", now()).expect("plan"));
        let (_, _, _, reason) =
            written(plan_authority(Some(&secret), "autoscaling", now()).expect("plan"));
        assert!(reason.starts_with("it names "), "{reason}");
    }

    #[test]
    fn a_ca_near_its_end_is_replaced_in_two_steps_with_both_cas_trusted_in_between() {
        let (old, first, _, _) = written(plan_authority(None, "keda", now()).expect("plan"));
        // The CA lasts ten years and is due 455 days before its end; two days earlier only the
        // (long expired) serving certificate is reissued, by the old CA.
        let (_, secret, _, reason) = written(
            plan_authority(Some(&first), "keda", days_later(10 * 365 - 456)).expect("plan"),
        );
        assert!(reason.starts_with("it ends at "), "{reason}");
        let due = days_later(10 * 365 - 454);
        let (new, step_one, _, reason) =
            written(plan_authority(Some(&secret), "keda", due).expect("plan"));
        assert!(reason.starts_with("its CA ends at "), "{reason}");
        assert!(new.bundle.starts_with(&new.ca.cert_pem()));
        assert!(
            new.bundle.ends_with(&old.ca.cert_pem()),
            "the old CA stays trusted"
        );
        assert_eq!(
            data(&step_one, TLS_CERT),
            data(&secret, TLS_CERT),
            "the serving certificate waits for the next check"
        );
        // The next check reissues the serving certificate with the new CA.
        let (after, step_two, _, reason) =
            written(plan_authority(Some(&step_one), "keda", due).expect("plan"));
        assert_eq!(reason, "it is not signed by the current CA");
        assert_eq!(after.bundle, new.bundle);
        kept(plan_authority(Some(&step_two), "keda", due).expect("plan"));
    }

    #[test]
    fn client_identities_are_issued_renewed_and_follow_the_bundle() {
        let (authority, _, _, _) = written(plan_authority(None, "keda", now()).expect("plan"));
        for identity in [Identity::MetricsApiserver, Identity::Activator] {
            let (secret, reason) = plan_identity(identity, &authority, "keda", None, now())
                .expect("plan")
                .expect("created");
            assert_eq!(reason, "it does not exist");
            assert_eq!(
                secret.metadata.name.as_deref(),
                Some(identity.secret_name())
            );
            assert!(!secret.data.as_ref().expect("data").contains_key(CA_KEY));
            assert!(
                plan_identity(identity, &authority, "keda", Some(&secret), days_later(200))
                    .expect("plan")
                    .is_none()
            );
            let (_, reason) =
                plan_identity(identity, &authority, "keda", Some(&secret), days_later(300))
                    .expect("plan")
                    .expect("renewed");
            assert!(reason.starts_with("it ends at "), "{reason}");
            // Another CA's bundle: reissued.
            let (other, _, _, _) = written(plan_authority(None, "keda", now()).expect("plan"));
            let (_, reason) = plan_identity(identity, &other, "keda", Some(&secret), now())
                .expect("plan")
                .expect("reissued");
            assert_eq!(reason, "its CA bundle is not the current one");
        }
    }

    #[test]
    fn a_certificate_of_another_identity_is_reissued() {
        let (authority, _, _, _) = written(plan_authority(None, "keda", now()).expect("plan"));
        let (activator, _) = plan_identity(Identity::Activator, &authority, "keda", None, now())
            .expect("plan")
            .expect("created");
        let (_, reason) = plan_identity(
            Identity::MetricsApiserver,
            &authority,
            "keda",
            Some(&activator),
            now(),
        )
        .expect("plan")
        .expect("reissued");
        assert_eq!(
            reason,
            "its common name is \"keda-activator\", not \"keda-metrics-apiserver\""
        );
    }

    #[test]
    fn fresh_secrets_hold_three_identities_of_one_ca() {
        let secrets = fresh_secrets("keda", now()).expect("secrets");
        let names: Vec<_> = secrets
            .iter()
            .map(|s| s.metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(
            names,
            [
                "keda-rs-certs",
                "keda-rs-metrics-apiserver-certs",
                "keda-rs-activator-certs"
            ]
        );
        let authority = kept(plan_authority(Some(&secrets[0]), "keda", now()).expect("plan"));
        for (identity, secret) in [
            (Identity::MetricsApiserver, &secrets[1]),
            (Identity::Activator, &secrets[2]),
        ] {
            assert!(
                plan_identity(identity, &authority, "keda", Some(secret), now())
                    .expect("plan")
                    .is_none(),
                "{identity} is current"
            );
        }
    }
}
