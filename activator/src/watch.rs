//! Kubernetes input: ScaledObjects (the `http` triggers become targets and routes) and
//! EndpointSlices (the ready endpoints of each target's Service, and of the activator's own
//! Service for the capacity split), through `kube::runtime` reflectors. Every change rebuilds
//! the configuration from the two caches; the request path never calls the API.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::{FutureExt, StreamExt, TryStreamExt};
use k8s_openapi::api::discovery::v1::{EndpointPort, EndpointSlice};
use keda_api::ScaledObject;
use keda_scalers::ScalerContext;
use keda_scalers::scalers::http::claims::{self, Claim, HostPolicy};
use keda_scalers::scalers::http::protocol::TargetKey;
use keda_scalers::scalers::http::{HttpTrigger, PortRef};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio_util::sync::CancellationToken;

use crate::balance::Replicas;
use crate::server::Readiness;
use crate::supervise::panic_message;
use crate::targets::{TargetConfig, Targets};
use crate::upstream::AppProtocol;

/// The label EndpointSlices carry naming their Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// The label naming the controller that manages an EndpointSlice.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// Its value on the slices Kubernetes' EndpointSlice controller makes from a Service's
/// selector and the pods it selects.
pub const ENDPOINTSLICE_CONTROLLER: &str = "endpointslice-controller.k8s.io";

/// Which EndpointSlice endpoints a target's Service may lead to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EndpointSources {
    /// Only endpoints of slices the EndpointSlice controller manages
    /// ([`ENDPOINTSLICE_CONTROLLER`]) whose `targetRef` is a Pod of the Service's namespace:
    /// a slice a tenant writes by hand (no `targetRef`, or another manager) points nowhere.
    /// The binary's default.
    #[default]
    ControllerManaged,
    /// Any slice labelled with the Service's name, whoever wrote it (KEDA's HTTP add-on,
    /// `--any-endpoint-slices`; also `keda-rs dev`, whose stand-in pods' slices it writes).
    Any,
}

/// What to watch.
#[derive(Clone, Debug, Default)]
pub struct WatchConfig {
    /// Only ScaledObjects and EndpointSlices of this namespace; `None` = all namespaces.
    pub namespace: Option<String>,
    /// The activator's own Service (`namespace`, `name`), for the capacity split.
    pub self_service: Option<(String, String)>,
    /// This replica's pod IP, to find its place among the activator endpoints.
    pub pod_ip: Option<IpAddr>,
    /// Which hosts each namespace may claim (`--http-host-policy`; the operator must have the
    /// same). The default here is no policy (any host), for tests and `keda-rs dev`; the
    /// binary's default is no host at all.
    pub host_policy: HostPolicy,
}

/// The `http` triggers of `objects` that are routed, parsed. Triggers that do not parse, and
/// the triggers of ScaledObjects whose routes are refused ([`claims::resolve`] under
/// `policy`: another namespace claimed an overlapping route first, or the policy forbids a
/// host), are returned as errors (`key`, message) so the caller can report them once.
///
/// Defence in depth: a trigger whose parsing panics (a bug) is an error of that trigger, not
/// the end of the watch for every object.
pub fn target_configs(
    objects: &[Arc<ScaledObject>],
    policy: &HostPolicy,
) -> (Vec<TargetConfig>, Vec<(TargetKey, String)>) {
    let mut configs = Vec::new();
    let mut errors = Vec::new();
    let mut claims = Vec::new();
    for so in objects {
        let namespace = so.namespace().unwrap_or_default();
        let name = so.name_any();
        let first = configs.len();
        for (index, trigger) in so.spec.triggers.iter().enumerate() {
            if trigger.type_ != "http" {
                continue;
            }
            let key = TargetKey::new(namespace.clone(), name.clone(), index);
            let ctx = ScalerContext {
                scalable_name: name.clone(),
                scalable_namespace: namespace.clone(),
                ..ScalerContext::from_trigger(trigger, index)
            };
            // The context is only read; nothing is left half-updated by a panic.
            match std::panic::catch_unwind(AssertUnwindSafe(|| HttpTrigger::parse(&ctx))) {
                Ok(Ok(trigger)) => configs.push(TargetConfig { key, trigger }),
                Ok(Err(e)) => errors.push((key, e.to_string())),
                Err(panic) => errors.push((
                    key,
                    format!(
                        "internal error while parsing the trigger (a bug): {}",
                        panic_message(panic.as_ref())
                    ),
                )),
            }
        }
        if configs.len() > first {
            claims.push(Claim::from_triggers(
                namespace,
                name,
                so.metadata.creation_timestamp.as_ref().map(|t| t.0),
                configs[first..].iter().map(|c| (c.key.trigger, &c.trigger)),
            ));
        }
    }
    let verdicts = claims::resolve(claims, policy);
    if verdicts.refused().next().is_none() {
        return (configs, errors);
    }
    let (routed, refused): (Vec<TargetConfig>, Vec<TargetConfig>) = configs
        .into_iter()
        .partition(|c| verdicts.refusal(&c.key.namespace, &c.key.name).is_none());
    for config in refused {
        if let Some(refusal) = verdicts.refusal(&config.key.namespace, &config.key.name) {
            errors.push((config.key, refusal.to_string()));
        }
    }
    (routed, errors)
}

/// The ready endpoints of Service `namespace/service` on `port`, from `slices`.
///
/// An endpoint counts when its `ready` condition is true or unset (the API's rule) and it does
/// not say it is a pod of another namespace (`targetRef.namespace`: a hand-written slice may
/// point anywhere, but a route never leads out of its ScaledObject's namespace). Under
/// [`EndpointSources::ControllerManaged`] it counts only in a slice labelled as the
/// EndpointSlice controller's, with a `targetRef` naming a Pod of the Service's namespace. The port
/// is found by name, else by number, else, when the slice has exactly one port, that one
/// (EndpointSlices carry target ports, so a Service port number that differs from its target
/// port is matched this way).
pub fn ready_endpoints(
    slices: &[Arc<EndpointSlice>],
    namespace: &str,
    service: &str,
    port: &PortRef,
    sources: EndpointSources,
) -> Vec<SocketAddr> {
    let mut ready = Vec::new();
    for slice in slices {
        if slice.namespace().as_deref() != Some(namespace)
            || slice.labels().get(SERVICE_NAME_LABEL).map(String::as_str) != Some(service)
            || !matches!(slice.address_type.as_str(), "IPv4" | "IPv6")
        {
            continue;
        }
        let strict = sources == EndpointSources::ControllerManaged;
        if strict
            && slice.labels().get(MANAGED_BY_LABEL).map(String::as_str)
                != Some(ENDPOINTSLICE_CONTROLLER)
        {
            continue;
        }
        let number =
            matched_port(slice.ports.as_deref().unwrap_or_default(), port).and_then(|p| p.port);
        let Some(number) = number.and_then(|n| u16::try_from(n).ok()) else {
            continue;
        };
        for endpoint in &slice.endpoints {
            let is_ready = endpoint
                .conditions
                .as_ref()
                .and_then(|c| c.ready)
                .unwrap_or(true);
            let foreign = endpoint
                .target_ref
                .as_ref()
                .and_then(|r| r.namespace.as_deref())
                .is_some_and(|ns| ns != namespace);
            // The controller names the pod of each endpoint; anything else is not its.
            let pod_of_namespace = endpoint.target_ref.as_ref().is_some_and(|r| {
                r.kind.as_deref() == Some("Pod")
                    && r.namespace.as_deref() == Some(namespace)
                    && r.name.as_deref().is_some_and(|n| !n.is_empty())
            });
            if !is_ready || foreign || (strict && !pod_of_namespace) {
                continue;
            }
            if let Some(ip) = endpoint
                .addresses
                .first()
                .and_then(|a| a.parse::<IpAddr>().ok())
            {
                ready.push(SocketAddr::new(ip, number));
            }
        }
    }
    ready.sort_unstable();
    ready.dedup();
    ready
}

/// The port of `ports` that `port` names: by name, else by number, else, when there is only
/// one, that one.
fn matched_port<'a>(ports: &'a [EndpointPort], port: &PortRef) -> Option<&'a EndpointPort> {
    let only = || match ports {
        [single] => Some(single),
        _ => None,
    };
    match port {
        PortRef::Only => only(),
        PortRef::Name(name) => ports.iter().find(|p| p.name.as_deref() == Some(name)),
        PortRef::Number(n) => ports
            .iter()
            .find(|p| p.port == Some(i32::from(*n)))
            .or_else(only),
    }
}

/// How the pods behind Service `namespace/service` on `port` are spoken to: the `appProtocol`
/// of the matched port of its slices (the EndpointSlice controller copies the Service port's),
/// the first slice that has the port deciding.
pub fn app_protocol(
    slices: &[Arc<EndpointSlice>],
    namespace: &str,
    service: &str,
    port: &PortRef,
) -> AppProtocol {
    slices
        .iter()
        .filter(|s| {
            s.namespace().as_deref() == Some(namespace)
                && s.labels().get(SERVICE_NAME_LABEL).map(String::as_str) == Some(service)
        })
        .find_map(|s| matched_port(s.ports.as_deref().unwrap_or_default(), port))
        .map_or(AppProtocol::Http1, |p| {
            AppProtocol::of(p.app_protocol.as_deref())
        })
}

/// This replica's place among the ready endpoints of its own Service.
pub fn replicas(
    slices: &[Arc<EndpointSlice>],
    self_service: &(String, String),
    pod_ip: Option<IpAddr>,
) -> Replicas {
    let mut ips: Vec<IpAddr> =
        // The activator's own Service is in the administrator's namespace.
        ready_endpoints(
            slices,
            &self_service.0,
            &self_service.1,
            &PortRef::Only,
            EndpointSources::Any,
        )
            .into_iter()
            .map(|a| a.ip())
            .collect();
    if ips.is_empty() {
        // A Service with several ports: any port will do to list the pods.
        for slice in slices {
            if slice.namespace().as_deref() == Some(self_service.0.as_str())
                && slice.labels().get(SERVICE_NAME_LABEL) == Some(&self_service.1)
            {
                for e in &slice.endpoints {
                    if e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true)
                        && let Some(ip) = e.addresses.first().and_then(|a| a.parse().ok())
                    {
                        ips.push(ip);
                    }
                }
            }
        }
    }
    ips.sort_unstable();
    ips.dedup();
    Replicas {
        index: pod_ip.and_then(|ip| ips.iter().position(|i| *i == ip)),
        count: ips.len().max(1),
    }
}

/// Applies the caches to `targets`, logging each trigger error once (until it changes).
struct Applier {
    targets: Arc<Targets>,
    config: WatchConfig,
    sources: EndpointSources,
    reported: HashMap<TargetKey, String>,
}

impl Applier {
    fn apply(&mut self, objects: &Store<ScaledObject>, slices: &Store<EndpointSlice>) {
        let (configs, errors) = target_configs(&objects.state(), &self.config.host_policy);
        let errors: HashMap<TargetKey, String> = errors.into_iter().collect();
        for (key, message) in &errors {
            if self.reported.get(key) != Some(message) {
                tracing::warn!(target = %key, error = %message, "http trigger ignored");
            }
        }
        self.reported = errors;
        let slices = slices.state();
        let ready: BTreeMap<TargetKey, (Vec<SocketAddr>, AppProtocol)> = configs
            .iter()
            .map(|c| {
                let addrs = ready_endpoints(
                    &slices,
                    &c.key.namespace,
                    &c.trigger.service,
                    &c.trigger.port,
                    self.sources,
                );
                let protocol = app_protocol(
                    &slices,
                    &c.key.namespace,
                    &c.trigger.service,
                    &c.trigger.port,
                );
                (c.key.clone(), (addrs, protocol))
            })
            .collect();
        if let Some(own) = &self.config.self_service {
            self.targets
                .set_replicas(replicas(&slices, own, self.config.pod_ip));
        }
        self.targets.apply(configs);
        for (key, (addrs, protocol)) in ready {
            self.targets.set_protocol(&key, protocol);
            self.targets.set_ready(&key, addrs);
        }
    }
}

/// Why the watch task stopped before it was asked to.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The watch streams ended (they retry their errors and should not end).
    #[error("the ScaledObject and EndpointSlice watches ended")]
    Ended,
}

/// Watches until `cancel`, keeping `targets` in line with the cluster; sets `ready` once both
/// caches have their first full list. Watch errors (the API server unreachable, a watch
/// expired) are retried with backoff inside the watches, logged, and not returned: the routes
/// known keep serving meanwhile. Runs under [`crate::supervise`] in the binary, which starts
/// it again (with fresh caches, listing everything) if it panics or returns.
///
/// # Errors
/// [`WatchError::Ended`]: the watch streams ended before `cancel`.
pub async fn run(
    client: Client,
    config: WatchConfig,
    targets: Arc<Targets>,
    ready: Readiness,
    cancel: CancellationToken,
) -> Result<(), WatchError> {
    run_with_endpoints(client, config, EndpointSources::Any, targets, ready, cancel).await
}

/// As [`run`], taking a target's endpoints only from `sources` (the binary:
/// [`EndpointSources::ControllerManaged`] unless `--any-endpoint-slices`; [`run`], for tests
/// and `keda-rs dev`, from any slice, as its default host policy allows any host).
///
/// # Errors
/// [`WatchError::Ended`]: the watch streams ended before `cancel`.
pub async fn run_with_endpoints(
    client: Client,
    config: WatchConfig,
    sources: EndpointSources,
    targets: Arc<Targets>,
    ready: Readiness,
    cancel: CancellationToken,
) -> Result<(), WatchError> {
    let (objects_api, slices_api): (Api<ScaledObject>, Api<EndpointSlice>) = match &config.namespace
    {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client, ns),
        ),
        None => (Api::all(client.clone()), Api::all(client)),
    };
    let (objects, objects_writer) = reflector::store::<ScaledObject>();
    let (slices, slices_writer) = reflector::store::<EndpointSlice>();
    let object_events = reflector::reflector(
        objects_writer,
        watcher(objects_api, watcher::Config::default()).default_backoff(),
    )
    .map_ok(|_| ())
    .boxed();
    let slice_events = reflector::reflector(
        slices_writer,
        watcher(
            slices_api,
            watcher::Config::default().labels(SERVICE_NAME_LABEL),
        )
        .default_backoff(),
    )
    .map_ok(|_| ())
    .boxed();
    let mut events = futures::stream::select(object_events, slice_events);
    let mut applier = Applier {
        targets,
        config,
        sources,
        reported: HashMap::new(),
    };
    loop {
        let event = tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            event = events.next() => event,
        };
        match event {
            Some(Ok(())) => {
                if is_ready(&objects) && is_ready(&slices) {
                    // Drain what is already queued so a burst causes one rebuild.
                    while let Some(Some(Ok(()))) = events.next().now_or_never() {}
                    applier.apply(&objects, &slices);
                    ready.set(true);
                }
            }
            Some(Err(error)) => tracing::warn!(%error, "watch failed; retrying"),
            None => return Err(WatchError::Ended),
        }
    }
}

/// Whether `store` has had its first full list.
pub(crate) fn is_ready<K>(store: &Store<K>) -> bool
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    store
        .wait_until_ready()
        .now_or_never()
        .is_some_and(|r| r.is_ok())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort};
    use kube::api::ObjectMeta;

    use super::*;

    fn slice(
        ns: &str,
        service: &str,
        ports: &[(&str, i32)],
        endpoints: &[(&str, Option<bool>)],
    ) -> Arc<EndpointSlice> {
        Arc::new(EndpointSlice {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(format!("{service}-abc")),
                labels: Some([(SERVICE_NAME_LABEL.to_string(), service.to_string())].into()),
                ..ObjectMeta::default()
            },
            address_type: "IPv4".into(),
            ports: Some(
                ports
                    .iter()
                    .map(|(name, port)| EndpointPort {
                        name: Some(name.to_string()),
                        port: Some(*port),
                        ..EndpointPort::default()
                    })
                    .collect(),
            ),
            endpoints: endpoints
                .iter()
                .map(|(ip, ready)| Endpoint {
                    addresses: vec![ip.to_string()],
                    conditions: Some(EndpointConditions {
                        ready: *ready,
                        ..EndpointConditions::default()
                    }),
                    ..Endpoint::default()
                })
                .collect(),
        })
    }

    #[test]
    fn the_matched_ports_app_protocol_chooses_http2() {
        let with_protocols = |protocols: &[(&str, i32, Option<&str>)]| {
            let mut s = (*slice("shop", "web", &[], &[("10.0.0.1", Some(true))])).clone();
            s.ports = Some(
                protocols
                    .iter()
                    .map(|(name, port, app)| EndpointPort {
                        name: Some(name.to_string()),
                        port: Some(*port),
                        app_protocol: app.map(str::to_string),
                        ..EndpointPort::default()
                    })
                    .collect(),
            );
            vec![Arc::new(s)]
        };
        let slices = with_protocols(&[
            ("http", 8080, None),
            ("grpc", 9000, Some("kubernetes.io/h2c")),
        ]);
        let of = |port: PortRef| app_protocol(&slices, "shop", "web", &port);
        assert_eq!(of(PortRef::Name("grpc".into())), AppProtocol::H2c);
        assert_eq!(of(PortRef::Number(9000)), AppProtocol::H2c);
        assert_eq!(of(PortRef::Name("http".into())), AppProtocol::Http1);
        // Two ports and none named: nothing matches, HTTP/1.1.
        assert_eq!(of(PortRef::Only), AppProtocol::Http1);
        // Another Service's or namespace's slices say nothing.
        assert_eq!(
            app_protocol(&slices, "other", "web", &PortRef::Number(9000)),
            AppProtocol::Http1
        );
        for (value, expected) in [
            (Some("kubernetes.io/h2c"), AppProtocol::H2c),
            (Some("H2C"), AppProtocol::H2c),
            (Some("grpc"), AppProtocol::H2c),
            (Some("kubernetes.io/h2"), AppProtocol::H2),
            (Some("https"), AppProtocol::Https),
            (Some("kubernetes.io/wss"), AppProtocol::Https),
            (Some("kubernetes.io/ws"), AppProtocol::Http1),
            (Some("http"), AppProtocol::Http1),
            (None, AppProtocol::Http1),
        ] {
            let slices = with_protocols(&[("p", 1, value)]);
            assert_eq!(
                app_protocol(&slices, "shop", "web", &PortRef::Only),
                expected,
                "{value:?}"
            );
        }
    }

    #[test]
    fn ready_endpoints_follow_the_ready_condition_and_the_port() {
        let slices = vec![
            slice(
                "shop",
                "web",
                &[("http", 8080), ("metrics", 9090)],
                &[
                    ("10.0.0.2", Some(true)),
                    ("10.0.0.1", None),
                    ("10.0.0.3", Some(false)),
                ],
            ),
            slice(
                "shop",
                "other",
                &[("http", 80)],
                &[("10.0.0.9", Some(true))],
            ),
            slice(
                "elsewhere",
                "web",
                &[("http", 8080)],
                &[("10.0.1.1", Some(true))],
            ),
        ];
        let addrs = |port: PortRef| -> Vec<String> {
            ready_endpoints(&slices, "shop", "web", &port, EndpointSources::Any)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(
            addrs(PortRef::Name("http".into())),
            ["10.0.0.1:8080", "10.0.0.2:8080"]
        );
        assert_eq!(
            addrs(PortRef::Number(9090)),
            ["10.0.0.1:9090", "10.0.0.2:9090"]
        );
        // Two ports and no choice: nothing (the trigger must name one).
        assert!(addrs(PortRef::Only).is_empty());
        assert!(addrs(PortRef::Name("grpc".into())).is_empty());
    }

    fn scaled_object(name: &str, metadata: serde_json::Value) -> Arc<ScaledObject> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                "metadata": {"name": name, "namespace": "shop"},
                "spec": {
                    "scaleTargetRef": {"name": name},
                    "triggers": [{"type": "http", "metadata": metadata}]
                }
            }))
            .expect("a ScaledObject"),
        )
    }

    #[test]
    fn a_trigger_that_fails_to_parse_in_any_way_leaves_the_others_configured() {
        let objects = [
            // Once panicked in the duration parser (issue 14): whether it is refused or
            // caught as a panic, it is this trigger's error only.
            scaled_object(
                "huge",
                serde_json::json!({"hosts": "huge.example.com", "service": "huge", "holdTimeout": "1e20"}),
            ),
            scaled_object(
                "bad",
                serde_json::json!({"hosts": "bad.example.com", "service": "bad", "holdTimeout": "soon"}),
            ),
            scaled_object(
                "shop",
                serde_json::json!({"hosts": "shop.example.com", "service": "shop"}),
            ),
        ];
        let (configs, errors) = target_configs(&objects, &HostPolicy::allow_all());
        let configured: Vec<&str> = configs.iter().map(|c| c.key.name.as_str()).collect();
        assert_eq!(configured, ["shop"]);
        let failed: Vec<&str> = errors.iter().map(|(key, _)| key.name.as_str()).collect();
        assert_eq!(failed, ["huge", "bad"]);
        assert!(
            errors
                .iter()
                .all(|(_, message)| message.contains("holdTimeout")
                    || message.starts_with("internal error while parsing the trigger"))
        );
    }

    #[test]
    fn an_endpoint_naming_a_pod_of_another_namespace_is_not_used() {
        let mut own = slice(
            "shop",
            "web",
            &[("http", 8080)],
            &[("10.0.0.1", Some(true))],
        );
        let mut foreign = Endpoint {
            addresses: vec!["10.9.9.9".into()],
            ..Endpoint::default()
        };
        foreign.target_ref = Some(k8s_openapi::api::core::v1::ObjectReference {
            kind: Some("Pod".into()),
            namespace: Some("bank".into()),
            name: Some("vault-0".into()),
            ..Default::default()
        });
        let mut same = foreign.clone();
        same.addresses = vec!["10.0.0.2".into()];
        same.target_ref.as_mut().unwrap().namespace = Some("shop".into());
        Arc::make_mut(&mut own).endpoints.extend([foreign, same]);
        let addrs: Vec<String> =
            ready_endpoints(&[own], "shop", "web", &PortRef::Only, EndpointSources::Any)
                .iter()
                .map(ToString::to_string)
                .collect();
        assert_eq!(addrs, ["10.0.0.1:8080", "10.0.0.2:8080"]);
    }

    #[test]
    fn only_the_controllers_endpoints_of_pods_of_the_namespace_count_by_default() {
        let pod = |ns: &str| {
            Some(k8s_openapi::api::core::v1::ObjectReference {
                kind: Some("Pod".into()),
                namespace: Some(ns.into()),
                name: Some("web-0".into()),
                ..Default::default()
            })
        };
        let managed = |ip: &str, target| {
            let mut s = slice("shop", "web", &[("http", 8080)], &[(ip, Some(true))]);
            let s_mut = Arc::make_mut(&mut s);
            s_mut
                .metadata
                .labels
                .as_mut()
                .unwrap()
                .insert(MANAGED_BY_LABEL.into(), ENDPOINTSLICE_CONTROLLER.into());
            s_mut.endpoints[0].target_ref = target;
            s
        };
        let mut by_hand = slice(
            "shop",
            "web",
            &[("http", 8080)],
            &[("10.9.9.1", Some(true))],
        );
        Arc::make_mut(&mut by_hand).endpoints[0].target_ref = pod("shop");
        let slices = [
            managed("10.0.0.1", pod("shop")),
            managed("10.9.9.2", None),
            managed("10.9.9.3", pod("bank")),
            by_hand,
        ];
        let addrs = |sources| -> Vec<String> {
            ready_endpoints(&slices, "shop", "web", &PortRef::Only, sources)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(addrs(EndpointSources::ControllerManaged), ["10.0.0.1:8080"]);
        assert_eq!(
            addrs(EndpointSources::Any),
            ["10.0.0.1:8080", "10.9.9.1:8080", "10.9.9.2:8080"]
        );
    }

    fn http_object(
        ns: &str,
        name: &str,
        second: i64,
        hosts: &str,
        prefixes: &str,
    ) -> Arc<ScaledObject> {
        let mut so: ScaledObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"scaleTargetRef": {"name": name}, "triggers": [
                {"type": "cron", "metadata": {}},
                {"type": "http", "metadata": {"hosts": hosts, "pathPrefixes": prefixes, "service": name}}
            ]}
        }))
        .unwrap();
        so.metadata.creation_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                jiff::Timestamp::from_second(1_700_000_000 + second).unwrap(),
            ));
        Arc::new(so)
    }

    #[test]
    fn refused_objects_get_no_target_and_are_reported() {
        let objects = [
            http_object("shop", "shop", 1, "shop.example.com", "/"),
            http_object("attacker", "steal", 2, "shop.example.com", "/login"),
            http_object("blog", "blog", 3, "blog.example.com", "/"),
        ];
        let (configs, errors) = target_configs(&objects, &HostPolicy::allow_all());
        let routed: Vec<String> = configs.iter().map(|c| c.key.to_string()).collect();
        assert_eq!(routed.len(), 2, "{routed:?}");
        assert!(configs.iter().all(|c| c.key.namespace != "attacker"));
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].0, TargetKey::new("attacker", "steal", 1));
        assert!(
            errors[0].1.contains("ScaledObject shop/shop"),
            "{}",
            errors[0].1
        );
        let policy = HostPolicy::from_yaml("blog: [blog.example.com]").unwrap();
        let (configs, errors) = target_configs(&objects, &policy);
        assert_eq!(configs.len(), 1);
        assert_eq!(configs[0].key.namespace, "blog");
        assert_eq!(errors.len(), 2);
    }

    #[test]
    fn this_replica_finds_its_place_among_the_activators() {
        let slices = vec![slice(
            "keda",
            "keda-activator",
            &[("http", 8080), ("admin", 9090)],
            &[
                ("10.1.0.7", Some(true)),
                ("10.1.0.3", Some(true)),
                ("10.1.0.5", Some(false)),
            ],
        )];
        let own = ("keda".to_string(), "keda-activator".to_string());
        assert_eq!(
            replicas(&slices, &own, Some("10.1.0.7".parse().unwrap())),
            Replicas {
                index: Some(1),
                count: 2
            }
        );
        assert_eq!(
            replicas(&slices, &own, None),
            Replicas {
                index: None,
                count: 2
            }
        );
    }
}
