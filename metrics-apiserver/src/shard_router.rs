//! Routing metric reads to the operator replica that owns the object (`--shards=auto` on the
//! operator, `--operator-shards` here).
//!
//! The router reads the operator's shard Leases (the label [`LEASE_LABEL`] in the operator's
//! namespace) every retry period, judges them live as the operator does ([`LiveLeases`]), and
//! builds the same [`Ring`]: so it sends each read to the replica that runs the object's loop,
//! at the address the replica wrote on its Lease ([`keda_api::shards::ADDRESS_ANNOTATION`]),
//! with the TLS settings of `--metrics-service-*` (the serving certificate must name
//! `--metrics-service-server-name`).
//!
//! # During a move
//! An object that moves is served by its old owner until the new one has started its loop (the
//! old one keeps the loop, without polling, for twice the operator's hold). A read goes to the
//! owner in the current ring; when that replica cannot answer for the object (no connection, no
//! loop for it, not ready), to its owner in the ring before the last change; then to the other
//! live replicas; then to `--metrics-service-address`. An answer that is the object's own
//! (a value, a scaler error, an unknown metric) is returned as it is. So a move never turns
//! into an error the HPA acts on while either owner can answer. When none can (a replica was
//! killed and its Lease has not expired yet, so no other runs its objects' loops), the answer
//! is the first replica's that could not be asked or cannot answer now (503), or, when every
//! replica asked said it has no loop for the object, 404.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwap;
use async_trait::async_trait;
use k8s_openapi::api::coordination::v1::Lease;
use keda_api::external_metrics::{ExternalMetricValue, ServiceErrorReason};
use keda_api::shards::{LEASE_LABEL, LeaseRecord, LiveLeases, Member, Ring};
use kube::api::{Api, ListParams};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::operator_client::{MetricSource, OperatorClient, OperatorClientConfig, OperatorError};

/// How the router reads the shard Leases.
#[derive(Clone, Debug)]
pub struct ShardRouterConfig {
    /// The operator's namespace (where its shard Leases are).
    pub namespace: String,
    /// How often the Leases are listed (the operator's retry period, 2 s by default).
    pub retry_period: Duration,
    /// The duration of a Lease that names none (the operator always names one).
    pub lease_duration: Duration,
}

impl Default for ShardRouterConfig {
    fn default() -> Self {
        ShardRouterConfig {
            namespace: "keda".to_string(),
            retry_period: Duration::from_secs(2),
            lease_duration: Duration::from_secs(15),
        }
    }
}

#[derive(Default)]
struct Routes {
    ring: Arc<Ring>,
    previous: Arc<Ring>,
    members: Vec<Member>,
}

/// A [`MetricSource`] that sends each read to the owning operator replica.
pub struct ShardRouter {
    api: Api<Lease>,
    config: ShardRouterConfig,
    template: OperatorClientConfig,
    fallback: Arc<OperatorClient>,
    routes: ArcSwap<Routes>,
    clients: Mutex<HashMap<String, (Arc<OperatorClient>, CancellationToken)>>,
    live: Mutex<LiveLeases>,
}

impl std::fmt::Debug for ShardRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardRouter")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Whether `error` says the replica cannot answer for the object (so another may), rather
/// than being the object's own answer.
fn try_another(error: &OperatorError) -> bool {
    match error {
        OperatorError::Connect { .. }
        | OperatorError::Connection { .. }
        | OperatorError::Timeout { .. }
        | OperatorError::Protocol { .. } => true,
        OperatorError::Service { error, .. } => matches!(
            error.reason,
            ServiceErrorReason::ScaledObjectNotFound | ServiceErrorReason::Unavailable
        ),
    }
}

/// Whether `error` says the replica has no loop for the object (it does not own it).
fn not_found(error: &OperatorError) -> bool {
    matches!(error, OperatorError::Service { error, .. } if error.reason == ServiceErrorReason::ScaledObjectNotFound)
}

impl ShardRouter {
    /// A router listing Leases through `client`; `template` is the TLS and timeouts of the
    /// operator client (its address is replaced by each replica's); `fallback` answers when no
    /// replica can.
    pub fn new(
        client: kube::Client,
        config: ShardRouterConfig,
        template: OperatorClientConfig,
        fallback: Arc<OperatorClient>,
    ) -> ShardRouter {
        ShardRouter {
            api: Api::namespaced(client, &config.namespace),
            config,
            template,
            fallback,
            routes: ArcSwap::default(),
            clients: Mutex::default(),
            live: Mutex::default(),
        }
    }

    /// Reads the Leases once now, then every retry period until `cancel`.
    pub fn follow(self: &Arc<Self>, cancel: CancellationToken) {
        let this = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                if let Err(error) = this.refresh(&cancel).await {
                    warn!(%error, "shard routing: cannot list the operator's shard leases");
                }
                tokio::select! {
                    () = cancel.cancelled() => break,
                    () = tokio::time::sleep(this.config.retry_period) => {}
                }
            }
            for (_, (_, token)) in this
                .clients
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .drain()
            {
                token.cancel();
            }
        });
    }

    /// One reading of the Leases.
    ///
    /// # Errors
    /// The list failed (the routes stay as they were).
    pub async fn refresh(&self, cancel: &CancellationToken) -> Result<(), kube::Error> {
        let listed = self
            .api
            .list(&ListParams::default().labels(&format!("{LEASE_LABEL}=true")))
            .await?;
        let records: Vec<LeaseRecord> = listed
            .items
            .iter()
            .map(|l| LeaseRecord::from_lease(l, self.config.lease_duration))
            .collect();
        let (members, _) = self
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .observe(&records, std::time::Instant::now(), Duration::MAX);
        let current = self.routes.load();
        if current.members == members {
            return Ok(());
        }
        info!(members = ?members.iter().map(|m| m.identity.as_str()).collect::<Vec<_>>(), "shard routing: operator replicas changed");
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        for member in &members {
            let Some(address) = &member.address else {
                continue;
            };
            clients.entry(address.clone()).or_insert_with(|| {
                let client = Arc::new(OperatorClient::new(OperatorClientConfig {
                    address: address.clone(),
                    ..self.template.clone()
                }));
                let token = cancel.child_token();
                client.keep_warm(token.clone());
                (client, token)
            });
        }
        clients.retain(|address, (_, token)| {
            let keep = members
                .iter()
                .any(|m| m.address.as_deref() == Some(address.as_str()));
            if !keep {
                token.cancel();
            }
            keep
        });
        drop(clients);
        let ring = Arc::new(Ring::new(members.iter().map(|m| m.identity.clone())));
        self.routes.store(Arc::new(Routes {
            ring,
            previous: current.ring.clone(),
            members,
        }));
        Ok(())
    }

    /// The replicas to ask for `namespace/name`, in order: the owner, the previous owner, the
    /// other live replicas (identities).
    pub fn candidates(&self, namespace: &str, name: &str) -> Vec<String> {
        let routes = self.routes.load();
        let mut order: Vec<String> = Vec::new();
        let mut push = |identity: Option<&str>| {
            if let Some(identity) = identity
                && !order.iter().any(|o| o == identity)
            {
                order.push(identity.to_string());
            }
        };
        push(routes.ring.owner(namespace, name));
        push(routes.previous.owner(namespace, name));
        for member in &routes.members {
            push(Some(&member.identity));
        }
        order
    }

    fn client_of(&self, identity: &str) -> Option<Arc<OperatorClient>> {
        let routes = self.routes.load();
        let address = routes
            .members
            .iter()
            .find(|m| m.identity == identity)?
            .address
            .clone()?;
        self.clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&address)
            .map(|(client, _)| client.clone())
    }
}

#[async_trait]
impl MetricSource for ShardRouter {
    async fn metric_values(
        &self,
        namespace: &str,
        scaled_object: &str,
        metric: &str,
    ) -> Result<Vec<ExternalMetricValue>, OperatorError> {
        // When nobody answers: the first replica that could not be asked or cannot answer now
        // (a crashed owner before its Lease expires: 503), else that none has the object.
        let (mut unavailable, mut last) = (None, None);
        for identity in self.candidates(namespace, scaled_object) {
            let Some(client) = self.client_of(&identity) else {
                continue;
            };
            match client.metric_values(namespace, scaled_object, metric).await {
                Ok(values) => return Ok(values),
                Err(error) if try_another(&error) => {
                    debug!(replica = %identity, %error, "shard routing: trying the next replica");
                    if unavailable.is_none() && !not_found(&error) {
                        unavailable = Some(error);
                    } else {
                        last = Some(error);
                    }
                }
                Err(error) => return Err(error),
            }
        }
        match self
            .fallback
            .metric_values(namespace, scaled_object, metric)
            .await
        {
            Ok(values) => Ok(values),
            Err(error) if try_another(&error) => Err(unavailable.or(last).unwrap_or(error)),
            Err(error) => Err(error),
        }
    }
}
