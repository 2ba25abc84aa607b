//! Proxy and serve modes (issue 28), the decision part: which Services' endpoints the activators
//! manage, when a target flips between **proxy** (the clients' Service leads to the activators)
//! and **serve** (it leads to the target's ready pods), and the EndpointSlices that say so.
//!
//! Everything here is pure: the caller feeds the ready pod count and the clock, and writes the
//! slices [`desired_slices`] returns. See `docs/http.md`, "Proxy and serve modes".
//!
//! Safety for tenants: a Service is managed only when it opts in itself (the
//! [`SERVES_ANNOTATION`] naming a ScaledObject of **its own namespace**), has no selector (so
//! the EndpointSlice controller does not write its endpoints too), and the ScaledObject has an
//! `http` trigger whose backing Service is another one. A ScaledObject can therefore never make
//! the activators rewrite the endpoints of a Service whose owner did not ask for it, nor of a
//! Service in another namespace.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use keda_scalers::scalers::http::protocol::TargetKey;

use crate::watch::{MANAGED_BY_LABEL, SERVICE_NAME_LABEL};

/// The annotation a Service carries to have its endpoints managed: the name of a ScaledObject
/// of the same namespace with an `http` trigger.
pub const SERVES_ANNOTATION: &str = "activator.keda-rs.sh/serves";
/// The `endpointslice.kubernetes.io/managed-by` value of the slices the activators write.
pub const SERVE_MANAGER: &str = "activator.keda-rs.sh";
/// The annotation on a written slice naming the mode it carries (`proxy` or `serve`), which the
/// operator reads before a 1 -> 0 (it scales to zero only when every managed slice of the
/// target says `proxy`).
pub const MODE_ANNOTATION: &str = "activator.keda-rs.sh/mode";

/// Where the clients' Service leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// To the activators: they hold, count and forward every request.
    Proxy,
    /// To the target's ready pods directly.
    Serve,
}

impl Mode {
    /// The [`MODE_ANNOTATION`] value.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Proxy => "proxy",
            Mode::Serve => "serve",
        }
    }
}

/// When to flip (per target).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServePolicy {
    /// Ready pods needed, continuously for `settle`, to go from proxy to serve.
    pub enter_ready: usize,
    /// Below this many ready pods, back to proxy at once (`<= enter_ready`: the band between
    /// the two is the hysteresis).
    pub leave_ready: usize,
    /// How long the capacity must hold before serving.
    pub settle: Duration,
}

impl Default for ServePolicy {
    fn default() -> Self {
        Self {
            enter_ready: 2,
            leave_ready: 1,
            settle: Duration::from_secs(10),
        }
    }
}

impl ServePolicy {
    /// The policy, or why it cannot work.
    pub fn validated(self) -> Result<Self, ServeError> {
        if self.leave_ready == 0 || self.leave_ready > self.enter_ready {
            return Err(ServeError::Policy(format!(
                "need 1 <= leave_ready ({}) <= enter_ready ({})",
                self.leave_ready, self.enter_ready
            )));
        }
        Ok(self)
    }
}

/// One target's mode over time.
#[derive(Clone, Debug)]
pub struct ModeState {
    mode: Mode,
    /// Since when the capacity to serve has held, while in proxy mode.
    enough_since: Option<Instant>,
}

impl Default for ModeState {
    fn default() -> Self {
        Self::new()
    }
}

impl ModeState {
    /// A target starts in proxy mode: nothing is known of its pods yet.
    pub fn new() -> Self {
        Self {
            mode: Mode::Proxy,
            enough_since: None,
        }
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The mode after observing `ready` pods at `now`. `to_zero`: a scale to zero is pending
    /// (the operator asked for proxy mode first), which forces proxy and keeps it.
    pub fn step(
        &mut self,
        policy: &ServePolicy,
        ready: usize,
        to_zero: bool,
        now: Instant,
    ) -> Mode {
        if to_zero || ready < policy.leave_ready {
            self.mode = Mode::Proxy;
            self.enough_since = None;
            return self.mode;
        }
        match self.mode {
            Mode::Serve => {}
            Mode::Proxy => {
                if ready >= policy.enter_ready {
                    let since = *self.enough_since.get_or_insert(now);
                    if now.saturating_duration_since(since) >= policy.settle {
                        self.mode = Mode::Serve;
                        self.enough_since = None;
                    }
                } else {
                    self.enough_since = None;
                }
            }
        }
        self.mode
    }
}

/// Why a Service is not managed, or a slice not written.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ServeError {
    /// The Service names a ScaledObject that does not exist or has no `http` trigger.
    #[error("Service {namespace}/{service}: ScaledObject {scaled_object} has no http trigger")]
    NoTrigger {
        namespace: String,
        service: String,
        scaled_object: String,
    },
    /// The Service has a selector: the EndpointSlice controller writes its endpoints.
    #[error("Service {namespace}/{service} has a selector; a managed Service must have none")]
    HasSelector { namespace: String, service: String },
    /// The Service is the trigger's own backing Service.
    #[error("Service {namespace}/{service} is the http trigger's backing Service; name another")]
    IsBacking { namespace: String, service: String },
    /// An address a real API server refuses in an EndpointSlice.
    #[error("address {0} cannot be an endpoint (loopback, link-local, unspecified or multicast)")]
    Address(IpAddr),
    /// A bad [`ServePolicy`].
    #[error("serve policy: {0}")]
    Policy(String),
}

/// A Service whose endpoints the activators manage, and the target it serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Managed {
    /// The clients' Service (selector-less, opted in).
    pub namespace: String,
    pub service: String,
    /// The ScaledObject's target (`trigger`: its first `http` trigger).
    pub target: TargetKey,
    /// The Service's ports (name, port), mirrored in the slices.
    pub ports: Vec<(Option<String>, Option<String>)>,
}

/// The ScaledObject's `http` trigger as the selection needs it: key and backing Service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpTarget {
    pub key: TargetKey,
    pub backing_service: String,
}

/// The managed Services among `services`, and the refusals (to report once each).
///
/// `targets` are the routed `http` triggers; only one of the **Service's own namespace** can
/// be named, whatever the annotation says.
pub fn managed_services(
    services: &[Service],
    targets: &[HttpTarget],
) -> (Vec<Managed>, Vec<ServeError>) {
    let mut managed = Vec::new();
    let mut errors = Vec::new();
    for svc in services {
        let Some(so) = svc
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SERVES_ANNOTATION))
        else {
            continue;
        };
        let (Some(namespace), Some(name)) = (&svc.metadata.namespace, &svc.metadata.name) else {
            continue;
        };
        let Some(target) = targets
            .iter()
            .filter(|t| &t.key.namespace == namespace && &t.key.name == so)
            .min_by_key(|t| t.key.trigger)
        else {
            errors.push(ServeError::NoTrigger {
                namespace: namespace.clone(),
                service: name.clone(),
                scaled_object: so.clone(),
            });
            continue;
        };
        if &target.backing_service == name {
            errors.push(ServeError::IsBacking {
                namespace: namespace.clone(),
                service: name.clone(),
            });
            continue;
        }
        let spec = svc.spec.as_ref();
        if spec
            .and_then(|s| s.selector.as_ref())
            .is_some_and(|s| !s.is_empty())
        {
            errors.push(ServeError::HasSelector {
                namespace: namespace.clone(),
                service: name.clone(),
            });
            continue;
        }
        let ports = spec
            .and_then(|s| s.ports.as_ref())
            .map(|ports| {
                ports
                    .iter()
                    .map(|p| (p.name.clone(), p.app_protocol.clone()))
                    .collect()
            })
            .unwrap_or_default();
        managed.push(Managed {
            namespace: namespace.clone(),
            service: name.clone(),
            target: target.key.clone(),
            ports,
        });
    }
    (managed, errors)
}

/// Whether a real API server accepts `ip` as an endpoint address: it refuses the unspecified,
/// loopback, link-local (unicast and multicast) addresses, and we refuse multicast as well.
pub fn endpoint_address_ok(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_unspecified() || v4.is_loopback() || v4.is_link_local() || v4.is_multicast())
        }
        IpAddr::V6(v6) => {
            let link_local = (v6.segments()[0] & 0xffc0) == 0xfe80;
            let mapped_bad = v6
                .to_ipv4_mapped()
                .is_some_and(|v4| !endpoint_address_ok(IpAddr::V4(v4)));
            !(v6.is_unspecified()
                || v6.is_loopback()
                || link_local
                || v6.is_multicast()
                || mapped_bad)
        }
    }
}

/// The name of the slice of `service` for one address family.
pub fn slice_name(service: &str, ipv6: bool) -> String {
    // Service names are at most 63 characters; the suffix keeps the name within 253.
    format!("{service}-activator-{}", if ipv6 { "v6" } else { "v4" })
}

/// The EndpointSlices `managed` should have in `mode`: one per address family present, each
/// with every address of `addrs` (the activators' proxy addresses in proxy mode, the ready
/// pods in serve mode) and the Service's ports mapped to the port of those addresses. An
/// address the API server would refuse fails the whole set (nothing half-written).
///
/// In proxy mode with no activator address, and in serve mode with no ready pod, the slices
/// are empty rather than absent, so clients fail fast instead of reaching a stale endpoint.
pub fn desired_slices(
    managed: &Managed,
    mode: Mode,
    addrs: &[SocketAddr],
) -> Result<Vec<EndpointSlice>, ServeError> {
    if let Some(bad) = addrs.iter().find(|a| !endpoint_address_ok(a.ip())) {
        return Err(ServeError::Address(bad.ip()));
    }
    let mut by_family: BTreeMap<bool, Vec<SocketAddr>> = BTreeMap::new();
    by_family.entry(false).or_default();
    for a in addrs {
        by_family.entry(a.is_ipv6()).or_default().push(*a);
    }
    let mut slices = Vec::new();
    for (ipv6, mut addrs) in by_family {
        addrs.sort();
        addrs.dedup();
        // One slice carries one port per Service port; endpoints of several ports (pods on
        // different port numbers) cannot share a slice, so the first port number wins and the
        // others are left out: the managed Service's pods listen on one port.
        let port = addrs.first().map(|a| a.port());
        let addrs: Vec<_> = addrs
            .into_iter()
            .filter(|a| Some(a.port()) == port)
            .collect();
        let ports = port.map(|port| {
            managed
                .ports
                .iter()
                .map(|(name, app_protocol)| EndpointPort {
                    name: name.clone(),
                    port: Some(i32::from(port)),
                    protocol: Some("TCP".to_string()),
                    app_protocol: app_protocol.clone(),
                })
                .collect()
        });
        let endpoints = addrs
            .iter()
            .map(|a| Endpoint {
                addresses: vec![a.ip().to_string()],
                conditions: Some(EndpointConditions {
                    ready: Some(true),
                    serving: Some(true),
                    terminating: Some(false),
                }),
                ..Endpoint::default()
            })
            .collect();
        let labels = BTreeMap::from([
            (SERVICE_NAME_LABEL.to_string(), managed.service.clone()),
            (MANAGED_BY_LABEL.to_string(), SERVE_MANAGER.to_string()),
        ]);
        let annotations =
            BTreeMap::from([(MODE_ANNOTATION.to_string(), mode.as_str().to_string())]);
        slices.push(EndpointSlice {
            metadata: ObjectMeta {
                name: Some(slice_name(&managed.service, ipv6)),
                namespace: Some(managed.namespace.clone()),
                labels: Some(labels),
                annotations: Some(annotations),
                ..ObjectMeta::default()
            },
            address_type: if ipv6 { "IPv6" } else { "IPv4" }.to_string(),
            endpoints,
            ports,
        });
    }
    Ok(slices)
}

/// The field manager of the activators' writes.
pub const FIELD_MANAGER: &str = "keda-rs-activator";

/// Writes `slices` (from [`desired_slices`] for `managed`) with server-side apply, and deletes
/// the slice of an address family `slices` no longer has, so no stale endpoint stays behind.
/// Idempotent: every replica may write the same set.
pub async fn write_slices(
    client: &kube::Client,
    managed: &Managed,
    slices: &[EndpointSlice],
) -> Result<(), kube::Error> {
    use kube::api::{Api, DeleteParams, Patch, PatchParams};
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), &managed.namespace);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for slice in slices {
        let Some(name) = slice.metadata.name.as_deref() else {
            continue;
        };
        let mut body = serde_json::to_value(slice).map_err(kube::Error::SerdeError)?;
        body["apiVersion"] = "discovery.k8s.io/v1".into();
        body["kind"] = "EndpointSlice".into();
        api.patch(name, &params, &Patch::Apply(body)).await?;
    }
    for ipv6 in [false, true] {
        let name = slice_name(&managed.service, ipv6);
        if slices
            .iter()
            .any(|s| s.metadata.name.as_deref() == Some(name.as_str()))
        {
            continue;
        }
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};

    fn policy() -> ServePolicy {
        ServePolicy {
            enter_ready: 3,
            leave_ready: 1,
            settle: Duration::from_secs(10),
        }
    }

    #[test]
    fn flips_with_hysteresis_and_back_before_zero() {
        let p = policy();
        let t0 = Instant::now();
        let s = |secs| t0 + Duration::from_secs(secs);
        let mut m = ModeState::new();
        assert_eq!(m.step(&p, 0, false, s(0)), Mode::Proxy);
        assert_eq!(m.step(&p, 3, false, s(1)), Mode::Proxy, "not settled yet");
        assert_eq!(
            m.step(&p, 2, false, s(5)),
            Mode::Proxy,
            "dip resets the clock"
        );
        assert_eq!(m.step(&p, 3, false, s(6)), Mode::Proxy);
        assert_eq!(m.step(&p, 3, false, s(15)), Mode::Proxy);
        assert_eq!(m.step(&p, 3, false, s(16)), Mode::Serve, "settled 10 s");
        // Within the band: stays serving (no flap on 3 -> 2 -> 1).
        assert_eq!(m.step(&p, 2, false, s(17)), Mode::Serve);
        assert_eq!(m.step(&p, 1, false, s(18)), Mode::Serve);
        // A scale to zero asks for proxy first, and keeps it.
        assert_eq!(m.step(&p, 1, true, s(19)), Mode::Proxy);
        assert_eq!(m.step(&p, 5, true, s(40)), Mode::Proxy);
        // Below the band: proxy at once.
        let mut m = ModeState::new();
        for t in 0..=10 {
            m.step(&p, 4, false, s(t));
        }
        assert_eq!(m.mode(), Mode::Serve);
        assert_eq!(m.step(&p, 0, false, s(11)), Mode::Proxy);
        assert_eq!(m.step(&p, 4, false, s(12)), Mode::Proxy, "settles again");
    }

    #[test]
    fn policy_validation() {
        assert!(policy().validated().is_ok());
        let bad = ServePolicy {
            leave_ready: 4,
            ..policy()
        };
        assert!(bad.validated().is_err());
        let zero = ServePolicy {
            leave_ready: 0,
            ..policy()
        };
        assert!(zero.validated().is_err());
    }

    #[test]
    fn refuses_addresses_real_api_servers_refuse() {
        for bad in [
            "127.0.0.1",
            "127.3.4.5",
            "169.254.169.254",
            "0.0.0.0",
            "224.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!endpoint_address_ok(bad.parse().unwrap()), "{bad}");
        }
        for good in ["10.1.2.3", "192.168.0.4", "fd00::5", "2001:db8::1"] {
            assert!(endpoint_address_ok(good.parse().unwrap()), "{good}");
        }
    }

    fn service(ns: &str, name: &str, so: Option<&str>, selector: bool) -> Service {
        Service {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                annotations: so.map(|so| BTreeMap::from([(SERVES_ANNOTATION.into(), so.into())])),
                ..ObjectMeta::default()
            },
            spec: Some(ServiceSpec {
                selector: selector.then(|| BTreeMap::from([("app".into(), "shop".into())])),
                ports: Some(vec![ServicePort {
                    name: Some("http".into()),
                    port: 80,
                    app_protocol: Some("kubernetes.io/h2c".into()),
                    ..ServicePort::default()
                }]),
                ..ServiceSpec::default()
            }),
            status: None,
        }
    }

    fn target(ns: &str, so: &str, backing: &str) -> HttpTarget {
        HttpTarget {
            key: TargetKey {
                namespace: ns.into(),
                name: so.into(),
                trigger: 0,
            },
            backing_service: backing.into(),
        }
    }

    #[test]
    fn only_opted_in_selectorless_services_of_the_same_namespace() {
        let targets = [
            target("shop", "shop", "shop-pods"),
            target("blog", "blog", "blog"),
        ];
        let services = [
            service("shop", "shop", Some("shop"), false),
            // Not opted in: left alone, silently.
            service("shop", "other", None, false),
            // Names a ScaledObject of another namespace: there is none of that name here.
            service("evil", "front", Some("shop"), false),
            // Has a selector.
            service("shop", "selected", Some("shop"), true),
            // The backing Service itself.
            service("shop", "shop-pods", Some("shop"), false),
        ];
        let (managed, errors) = managed_services(&services, &targets);
        assert_eq!(managed.len(), 1);
        assert_eq!(managed[0].namespace, "shop");
        assert_eq!(managed[0].service, "shop");
        assert_eq!(managed[0].target, targets[0].key);
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(
            matches!(&errors[0], ServeError::NoTrigger { namespace, .. } if namespace == "evil")
        );
        assert!(matches!(&errors[1], ServeError::HasSelector { .. }));
        assert!(matches!(&errors[2], ServeError::IsBacking { .. }));
    }

    #[test]
    fn slices_carry_mode_addresses_and_ports() {
        let targets = [target("shop", "shop", "shop-pods")];
        let (managed, _) =
            managed_services(&[service("shop", "shop", Some("shop"), false)], &targets);
        let m = &managed[0];
        let activators: Vec<SocketAddr> = vec![
            "10.0.0.2:8080".parse().unwrap(),
            "10.0.0.1:8080".parse().unwrap(),
        ];
        let slices = desired_slices(m, Mode::Proxy, &activators).unwrap();
        assert_eq!(slices.len(), 1);
        let s = &slices[0];
        assert_eq!(s.metadata.name.as_deref(), Some("shop-activator-v4"));
        assert_eq!(s.address_type, "IPv4");
        let labels = s.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[SERVICE_NAME_LABEL], "shop");
        assert_eq!(labels[MANAGED_BY_LABEL], SERVE_MANAGER);
        assert_eq!(
            s.metadata.annotations.as_ref().unwrap()[MODE_ANNOTATION],
            "proxy"
        );
        let addrs: Vec<_> = s
            .endpoints
            .iter()
            .map(|e| e.addresses[0].as_str())
            .collect();
        assert_eq!(addrs, ["10.0.0.1", "10.0.0.2"]);
        let ports = s.ports.as_ref().unwrap();
        assert_eq!(ports[0].port, Some(8080));
        assert_eq!(ports[0].name.as_deref(), Some("http"));
        assert_eq!(ports[0].app_protocol.as_deref(), Some("kubernetes.io/h2c"));

        let pods: Vec<SocketAddr> = vec![
            "10.1.0.7:9000".parse().unwrap(),
            "[fd00::7]:9000".parse().unwrap(),
        ];
        let slices = desired_slices(m, Mode::Serve, &pods).unwrap();
        assert_eq!(slices.len(), 2);
        assert_eq!(slices[1].address_type, "IPv6");
        assert_eq!(
            slices[1].metadata.name.as_deref(),
            Some("shop-activator-v6")
        );
        assert_eq!(slices[0].ports.as_ref().unwrap()[0].port, Some(9000));
        assert_eq!(
            slices[0].metadata.annotations.as_ref().unwrap()[MODE_ANNOTATION],
            "serve"
        );

        // No pod: an empty slice, not a stale one.
        let empty = desired_slices(m, Mode::Serve, &[]).unwrap();
        assert_eq!(empty.len(), 1);
        assert!(empty[0].endpoints.is_empty());
        assert!(empty[0].ports.is_none());

        // Loopback refused, nothing written.
        let bad: Vec<SocketAddr> = vec![
            "10.0.0.1:8080".parse().unwrap(),
            "127.0.0.1:8080".parse().unwrap(),
        ];
        assert_eq!(
            desired_slices(m, Mode::Proxy, &bad),
            Err(ServeError::Address("127.0.0.1".parse().unwrap()))
        );
    }
}
