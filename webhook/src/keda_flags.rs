//! KEDA's admission webhook (`keda-admission-webhooks`) flags: `cmd/webhooks/main.go`,
//! controller-runtime's zap and `--kubeconfig`, klog's, as KEDA's manifest
//! (`config/webhooks/webhooks.yaml` at kedacore/keda 8b4f083ca8c8c2baf8477e322bd4d16ac4dfa09a)
//! and Helm chart (kedacore/charts 1444d00d90d7668cf7f53f270777d039371d90d0) pass them: the one
//! table saying what each does here. See [`keda_cli::keda_flags`].

use keda_cli::keda_flags::{KedaFlag, OFF_ADDRESS, Takes, common_flags};

/// Every flag of KEDA's webhook, with its meaning in keda-rs.
pub fn table() -> Vec<KedaFlag> {
    let own = [
        KedaFlag::same("metrics-bind-address", Takes::Value),
        KedaFlag::same("health-probe-bind-address", Takes::Value),
        KedaFlag::same("cert-dir", Takes::Value),
        KedaFlag::same("kubeconfig", Takes::Value),
        KedaFlag::ours("port", Takes::Value, "webhook-port"),
        KedaFlag::no_effect(
            "profiling-bind-address",
            Takes::Value,
            "Go's pprof profiles do not exist in a Rust process",
            OFF_ADDRESS,
        ),
        KedaFlag::no_effect(
            "kube-api-qps",
            Takes::Value,
            "the webhook only lists and watches the objects it checks against, once",
            &["20"],
        ),
        KedaFlag::no_effect(
            "kube-api-burst",
            Takes::Value,
            "the webhook only lists and watches the objects it checks against, once",
            &["30"],
        ),
        KedaFlag::no_effect(
            "cache-miss-to-direct-client",
            Takes::Bool,
            "the webhook answers from watched caches and refuses to answer before they are \
             listed (readyz), so a cache miss means the object does not exist",
            &["false"],
        ),
    ];
    own.into_iter().chain(common_flags()).collect()
}

/// A listen address flag as Go writes it; `None` when turned off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenAddress(pub Option<std::net::SocketAddr>);

impl std::str::FromStr for ListenAddress {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        listen_address(s).map(Self)
    }
}

/// A listen address as Go writes it: `:8081` (all interfaces), `IP:PORT`, `localhost:PORT`;
/// `0` or empty turns the listener off.
///
/// # Errors
/// Anything else.
pub fn listen_address(value: &str) -> Result<Option<std::net::SocketAddr>, String> {
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    let value = value.trim();
    if value.is_empty() || value == "0" {
        return Ok(None);
    }
    let invalid =
        || format!("{value:?} is not a listen address: use :PORT, IP:PORT, or 0 to disable");
    if let Some(port) = value.strip_prefix(':') {
        let port = port.parse::<u16>().map_err(|_| invalid())?;
        return Ok(Some(SocketAddr::new(
            IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            port,
        )));
    }
    if let Some(port) = value.strip_prefix("localhost:") {
        let port = port.parse::<u16>().map_err(|_| invalid())?;
        return Ok(Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)));
    }
    value.parse().map(Some).map_err(|_| invalid())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::start::service_tls_policy;

    #[test]
    fn go_listen_addresses_parse_and_zero_turns_off() {
        assert_eq!(
            listen_address(":8081")
                .ok()
                .flatten()
                .map(|a| a.to_string()),
            Some("0.0.0.0:8081".to_string())
        );
        assert_eq!(listen_address("0"), Ok(None));
        assert!(listen_address("eight").is_err());
    }

    #[test]
    fn service_tls_variables_fall_back_to_the_http_ones_as_in_keda() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_string())
            }
        };
        let http_only = service_tls_policy(&env(&[("KEDA_HTTP_MIN_TLS_VERSION", "TLS13")]));
        assert!(http_only.is_ok_and(|p| p.tls13_only));
        let both = service_tls_policy(&env(&[
            ("KEDA_HTTP_MIN_TLS_VERSION", "TLS13"),
            ("KEDA_SERVICE_MIN_TLS_VERSION", "TLS12"),
        ]));
        assert!(both.is_ok_and(|p| !p.tls13_only));
        let bad = service_tls_policy(&env(&[("KEDA_SERVICE_TLS_CIPHER_LIST", "RC4")]))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(bad.starts_with("KEDA_SERVICE_TLS_CIPHER_LIST:"), "{bad}");
    }
}
