//! The set of targets on this replica, kept across configuration changes (so in-flight counts
//! and held requests survive an edit of the ScaledObject), and the routing table built from
//! them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use arc_swap::ArcSwap;
use keda_scalers::scalers::http::HttpTrigger;
use keda_scalers::scalers::http::protocol::TargetKey;
use tokio::sync::mpsc;

use crate::balance::Replicas;
use crate::limits::{DEFAULT_HELD_MEMORY, DEFAULT_MAX_POD_CONNECTIONS};
use crate::metrics::SharedMetrics;
use crate::proxy::SharedRoutes;
use crate::route::{RouteSpec, RouteTable};
use crate::target::{Target, TargetSettings};
use crate::upstream::{NoPodTls, PodTls};

/// How the pods of Service `service` in `namespace` are checked over TLS with `trust`: their
/// certificate must name `<service>.<namespace>.svc`.
///
/// # Errors
/// [`NoPodTls::InvalidServerName`]: that name cannot be a TLS server name, so no certificate
/// can be checked for it (the pods then get no request, and the 502's log says why).
fn pod_tls(
    trust: Arc<rustls::ClientConfig>,
    service: &str,
    namespace: &str,
) -> Result<PodTls, NoPodTls> {
    let name = format!("{service}.{namespace}.svc");
    match rustls_pki_types::ServerName::try_from(name.clone()) {
        Ok(server_name) => Ok(PodTls {
            config: trust,
            server_name,
        }),
        Err(e) => Err(NoPodTls::InvalidServerName {
            name,
            reason: e.to_string(),
        }),
    }
}

/// One `http` trigger of one ScaledObject, parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetConfig {
    /// The ScaledObject and trigger index.
    pub key: TargetKey,
    /// The trigger.
    pub trigger: HttpTrigger,
}

impl TargetConfig {
    fn settings(&self, limits: TargetLimits) -> TargetSettings {
        TargetSettings {
            container_concurrency: self.trigger.container_concurrency,
            hold_timeout: self.trigger.hold_timeout,
            queue_depth: self.trigger.queue_depth,
            response_timeout: self.trigger.response_header_timeout,
            held_memory: limits.held_memory,
            max_pod_connections: limits.max_pod_connections,
        }
    }
}

/// The limits every target gets from the process's flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TargetLimits {
    /// Each target's limit on the memory of its held requests (`--held-request-memory`).
    pub held_memory: usize,
    /// Most connections (requests in flight) this replica opens to one pod, whatever the
    /// trigger's `containerConcurrency` (`--max-pod-connections`; 0: no limit).
    pub max_pod_connections: u32,
}

impl Default for TargetLimits {
    fn default() -> Self {
        Self {
            held_memory: DEFAULT_HELD_MEMORY,
            max_pod_connections: DEFAULT_MAX_POD_CONNECTIONS,
        }
    }
}

/// All targets and the routing table.
pub struct Targets {
    targets: Mutex<HashMap<TargetKey, (Arc<Target>, TargetConfig)>>,
    routes: SharedRoutes,
    wake: mpsc::Sender<TargetKey>,
    metrics: SharedMetrics,
    replicas: Mutex<Replicas>,
    /// The limits each target gets.
    limits: TargetLimits,
    /// Trusts `--pod-ca-file` for pods spoken to over TLS (HTTP/2 or HTTP/1.1); `None`: no
    /// such pod is spoken to.
    pod_tls: Mutex<Option<crate::upstream::PodTrust>>,
}

impl std::fmt::Debug for Targets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Targets")
            .field("count", &self.lock().len())
            .finish()
    }
}

impl Targets {
    /// No targets; `wake` receives the key of a target whose first request is held. Each
    /// target's held requests may keep [`DEFAULT_HELD_MEMORY`] bytes.
    pub fn new(wake: mpsc::Sender<TargetKey>, metrics: SharedMetrics) -> Arc<Self> {
        Self::with_held_memory(wake, metrics, DEFAULT_HELD_MEMORY)
    }

    /// As [`Targets::new`], each target's held requests keeping at most `held_memory` bytes
    /// (`--held-request-memory`).
    pub fn with_held_memory(
        wake: mpsc::Sender<TargetKey>,
        metrics: SharedMetrics,
        held_memory: usize,
    ) -> Arc<Self> {
        Self::with_limits(
            wake,
            metrics,
            TargetLimits {
                held_memory,
                ..TargetLimits::default()
            },
        )
    }

    /// As [`Targets::new`], each target held to `limits`.
    pub fn with_limits(
        wake: mpsc::Sender<TargetKey>,
        metrics: SharedMetrics,
        limits: TargetLimits,
    ) -> Arc<Self> {
        Arc::new(Self {
            targets: Mutex::default(),
            routes: Arc::new(ArcSwap::from_pointee(RouteTable::default())),
            wake,
            metrics,
            replicas: Mutex::default(),
            pod_tls: Mutex::default(),
            limits,
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<TargetKey, (Arc<Target>, TargetConfig)>> {
        self.targets.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The routing table the proxy reads.
    pub fn routes(&self) -> SharedRoutes {
        Arc::clone(&self.routes)
    }

    /// Makes the targets exactly `configs`: new ones are created, changed ones updated in
    /// place, missing ones dropped; then the routing table is rebuilt and swapped in. Routes
    /// are added in key order, so when two ScaledObjects claim the same host and prefix the
    /// first by namespace/name wins, on every replica alike.
    pub fn apply(&self, mut configs: Vec<TargetConfig>) {
        configs.sort_by(|a, b| a.key.cmp(&b.key));
        let replicas = *self.replicas.lock().unwrap_or_else(PoisonError::into_inner);
        let mut targets = self.lock();
        let mut next = HashMap::with_capacity(configs.len());
        let mut specs = Vec::with_capacity(configs.len());
        for config in configs {
            let target = match targets.remove(&config.key) {
                Some((target, _)) => {
                    target.set_settings(config.settings(self.limits));
                    target
                }
                None => {
                    let target = Target::new(
                        config.key.clone(),
                        config.settings(self.limits),
                        self.wake.clone(),
                        self.metrics.target(&config.key),
                    );
                    target.set_replicas(replicas);
                    target
                }
            };
            specs.push(RouteSpec {
                hosts: config.trigger.hosts.clone(),
                path_prefixes: config.trigger.path_prefixes.clone(),
                target: Arc::clone(&target),
            });
            next.insert(config.key.clone(), (target, config));
        }
        *targets = next;
        drop(targets);
        self.routes.store(Arc::new(RouteTable::build(specs)));
    }

    /// The target of `key`.
    pub fn get(&self, key: &TargetKey) -> Option<Arc<Target>> {
        self.lock().get(key).map(|(t, _)| Arc::clone(t))
    }

    /// Every target with its configuration.
    pub fn all(&self) -> Vec<(Arc<Target>, TargetConfig)> {
        self.lock()
            .values()
            .map(|(t, c)| (Arc::clone(t), c.clone()))
            .collect()
    }

    /// Sets the ready endpoints of `key`.
    pub fn set_ready(&self, key: &TargetKey, ready: Vec<SocketAddr>) {
        if let Some(target) = self.get(key) {
            target.set_ready(ready);
        }
    }

    /// Sets how the pods of `key` are spoken to. A TLS pod's certificate must be for
    /// `<service>.<namespace>.svc`, the name of the trigger's Service.
    pub fn set_protocol(&self, key: &TargetKey, protocol: crate::upstream::AppProtocol) {
        let Some((target, config)) = self
            .lock()
            .get(key)
            .map(|(t, c)| (Arc::clone(t), c.clone()))
        else {
            return;
        };
        // Only a TLS pod needs the name and the CA (this runs for every target on every watch
        // change).
        let tls = if matches!(
            protocol,
            crate::upstream::AppProtocol::H2 | crate::upstream::AppProtocol::Https
        ) {
            let trust = self
                .pod_tls
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
                .and_then(|trust| trust.for_protocol(protocol).cloned());
            match trust {
                Some(trust) => pod_tls(trust, &config.trigger.service, &key.namespace),
                None => Err(NoPodTls::NoCaFile),
            }
        } else {
            Err(NoPodTls::NotTls)
        };
        target.set_protocol(protocol, tls);
    }

    /// Trusts `trust` (the CA bundle of `--pod-ca-file`) for pods spoken to over TLS
    /// (HTTP/2 or HTTP/1.1), from the next [`Targets::set_protocol`] on.
    pub fn set_pod_tls(&self, trust: crate::upstream::PodTrust) {
        *self.pod_tls.lock().unwrap_or_else(PoisonError::into_inner) = Some(trust);
    }

    /// Sets this replica's place among the activators, for every target.
    pub fn set_replicas(&self, replicas: Replicas) {
        *self.replicas.lock().unwrap_or_else(PoisonError::into_inner) = replicas;
        for (target, _) in self.all() {
            target.set_replicas(replicas);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trust() -> Arc<rustls::ClientConfig> {
        let config = rustls::ClientConfig::builder_with_provider(keda_tls::provider())
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        Arc::new(config)
    }

    #[test]
    fn a_tls_pod_is_checked_for_its_services_name() {
        let tls = pod_tls(trust(), "web", "shop").expect("a valid name");
        assert_eq!(tls.server_name.to_str(), "web.shop.svc");
    }

    /// A name that cannot be a TLS server name is said to be the cause, not a missing
    /// `--pod-ca-file` (there is one).
    #[test]
    fn a_service_name_that_cannot_be_a_tls_server_name_is_named_in_the_error() {
        let error = pod_tls(trust(), "web", "bad namespace").expect_err("not a DNS name");
        assert_eq!(
            error,
            NoPodTls::InvalidServerName {
                name: "web.bad namespace.svc".to_string(),
                reason: "invalid dns name".to_string(),
            }
        );
        assert_eq!(
            error.to_string(),
            "the pod speaks TLS and its certificate cannot be checked: \"web.bad namespace.svc\" \
             (<service>.<namespace>.svc) cannot be a TLS server name (invalid dns name)"
        );
        assert!(!error.to_string().contains("--pod-ca-file"), "{error}");
    }
}
