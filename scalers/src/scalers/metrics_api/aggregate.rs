//! `aggregateFromKubeServiceEndpoints`: ask every ready endpoint of the Service the URL names
//! and combine the values with `aggregationType`, as KEDA's `metrics-api` does.
//!
//! - The URL's host is `<service>.<namespace>[...]` (KEDA splits it at dots); its port
//!   (explicit, else 80 for http and 443 for https) picks the EndpointSlice port of that number.
//!   A slice without that port number uses its only port when it has exactly one (a Service
//!   port whose target port differs), else the URL's port.
//! - Endpoints are those whose `ready` condition is true or unset, read from the operator's
//!   shared EndpointSlice watch (no API request per poll); each address is asked once, at most
//!   [`MAX_CONCURRENT`] at a time, with the URL's scheme, path and query.
//! - An endpoint that fails is left out (the average is over the endpoints that answered); the
//!   poll fails only when the Service has no ready endpoint or none answered.

use std::collections::HashSet;
use std::net::Ipv6Addr;

use futures::StreamExt;

use super::{Endpoint, MetricsApi};
use crate::cluster::{ClusterView, SliceSummary};
use crate::error::ScalerError;
use crate::http_client::describe_url;
use crate::pooled::HttpCall;
use crate::remote::{Classify, Failure};

/// Endpoints asked at once (KEDA asks 5 at a time too).
pub const MAX_CONCURRENT: usize = 5;

/// How the endpoints' values are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregation {
    /// The mean of the values (the default).
    Average,
    /// Their sum.
    Sum,
    /// The largest.
    Max,
    /// The smallest.
    Min,
}

impl Aggregation {
    /// `average`, `sum`, `max` or `min`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "average" => Some(Self::Average),
            "sum" => Some(Self::Sum),
            "max" => Some(Self::Max),
            "min" => Some(Self::Min),
            _ => None,
        }
    }

    /// Combines `values` (not empty).
    pub fn combine(self, values: &[f64]) -> f64 {
        let sum: f64 = values.iter().sum();
        // At most a few thousand endpoints: exact in f64.
        #[allow(clippy::cast_precision_loss)]
        let count = values.len().max(1) as f64;
        match self {
            Self::Average => sum / count,
            Self::Sum => sum,
            Self::Max => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            Self::Min => values.iter().copied().fold(f64::INFINITY, f64::min),
        }
    }
}

/// The Service a `metrics-api` URL names, and how its endpoints' values are combined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceAggregate {
    /// The Service's namespace (the host's second label).
    pub namespace: String,
    /// The Service's name (the host's first label).
    pub service: String,
    /// The port asked for: the URL's, else the scheme's default.
    pub port: u16,
    /// `aggregationType`.
    pub aggregation: Aggregation,
}

impl ServiceAggregate {
    /// The Service `url` names.
    ///
    /// # Errors
    /// The host is not `<service>.<namespace>[...]`.
    pub fn from_url(url: &url::Url, aggregation: Aggregation) -> Result<Self, String> {
        let host = url.host_str().unwrap_or_default();
        let mut labels = host.split('.');
        match (labels.next(), labels.next()) {
            (Some(service), Some(namespace)) if !service.is_empty() && !namespace.is_empty() => {
                Ok(Self {
                    namespace: namespace.to_string(),
                    service: service.to_string(),
                    port: url.port_or_known_default().unwrap_or(80),
                    aggregation,
                })
            }
            _ => Err(format!(
                "the host must be <service>.<namespace> (optionally followed by .svc.cluster.local), not \"{host}\""
            )),
        }
    }
}

/// The URL of every ready endpoint in `slices`: `url` with the endpoint's address and port.
pub fn endpoint_urls(url: &url::Url, port: u16, slices: &[SliceSummary]) -> Vec<url::Url> {
    let mut seen = HashSet::new();
    let mut urls = Vec::new();
    for slice in slices {
        let endpoint_port = slice
            .ports
            .iter()
            .find(|p| p.port == port)
            .or(match slice.ports.as_slice() {
                [only] => Some(only),
                _ => None,
            })
            .map_or(port, |p| p.port);
        for address in &slice.ready_addresses {
            if !seen.insert((address.as_str(), endpoint_port)) {
                continue;
            }
            let host = if address.parse::<Ipv6Addr>().is_ok() {
                format!("[{address}]")
            } else {
                address.clone()
            };
            let mut endpoint = url.clone();
            if endpoint.set_host(Some(&host)).is_ok()
                && endpoint.set_port(Some(endpoint_port)).is_ok()
            {
                urls.push(endpoint);
            }
        }
    }
    urls
}

/// Asks every ready endpoint of `aggregate`'s Service and combines the answers.
pub(super) async fn value(
    source: &MetricsApi,
    call: &HttpCall<'_>,
    endpoint: &Endpoint,
    aggregate: &ServiceAggregate,
    cluster: &dyn ClusterView,
) -> Result<f64, ScalerError> {
    let trigger = call.read.trigger;
    let service = format!("{}/{}", aggregate.namespace, aggregate.service);
    let slices = cluster
        .service_slices(&aggregate.namespace, &aggregate.service)
        .await
        .map_err(|e| ScalerError::Query {
            trigger: trigger.clone(),
            operation: format!("reading the EndpointSlices of Service {service}"),
            source: e.classify(),
        })?;
    let urls = endpoint_urls(&endpoint.url, aggregate.port, &slices);
    if urls.is_empty() {
        return Err(ScalerError::Unexpected {
            trigger: trigger.clone(),
            message: format!(
                "Service {service} (from url {}) has no ready endpoint to aggregate",
                describe_url(&endpoint.url)
            ),
        });
    }
    let asked = urls.len();
    let answers: Vec<Result<f64, ScalerError>> = futures::stream::iter(urls)
        .map(|url| async move { source.value_from(call, endpoint, &url).await })
        .buffer_unordered(MAX_CONCURRENT)
        .collect()
        .await;
    let mut values = Vec::with_capacity(asked);
    let mut first_error = None;
    for answer in answers {
        match answer {
            Ok(v) => values.push(v),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(error) if values.is_empty() => Err(ScalerError::Query {
            trigger: trigger.clone(),
            operation: format!("asking the {asked} ready endpoints of Service {service}"),
            source: match error {
                ScalerError::Connect { source, .. } | ScalerError::Query { source, .. } => source,
                // keda-rs' own words (an answer's problem, described without its text).
                other => Failure::local(other.to_string()),
            },
        }),
        _ => Ok(aggregate.aggregation.combine(&values)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::SlicePort;

    fn slice(ports: &[(Option<&str>, u16)], addresses: &[&str]) -> SliceSummary {
        SliceSummary {
            service: "web".into(),
            address_type: "IPv4".into(),
            ports: ports
                .iter()
                .map(|(name, port)| SlicePort {
                    name: name.map(str::to_string),
                    port: *port,
                })
                .collect(),
            ready_addresses: addresses.iter().map(|a| a.to_string()).collect(),
        }
    }

    #[test]
    fn the_host_names_service_and_namespace() {
        let agg =
            |u: &str| ServiceAggregate::from_url(&url::Url::parse(u).unwrap(), Aggregation::Sum);
        let found = agg("http://web.team.svc.cluster.local:8080/m").unwrap();
        assert_eq!(
            (found.service.as_str(), found.namespace.as_str(), found.port),
            ("web", "team", 8080)
        );
        assert_eq!(agg("https://web.team/m").unwrap().port, 443);
        assert_eq!(agg("http://web.team/m").unwrap().port, 80);
        assert_eq!(
            agg("http://web:8080/m").unwrap_err(),
            "the host must be <service>.<namespace> (optionally followed by .svc.cluster.local), not \"web\""
        );
    }

    #[test]
    fn endpoint_urls_keep_path_and_query_and_pick_the_port() {
        let url = url::Url::parse("http://web.team:8080/api/v1?x=1").unwrap();
        let slices = [
            slice(
                &[(Some("http"), 8080), (Some("admin"), 9000)],
                &["10.0.0.1", "10.0.0.2"],
            ),
            // a duplicate address is asked once
            slice(&[(Some("http"), 8080)], &["10.0.0.2"]),
            // the only port, though its number differs from the URL's (targetPort)
            slice(&[(Some("http"), 9090)], &["10.0.0.3", "fd00::1"]),
            // two ports, neither the URL's: the URL's port
            slice(&[(None, 1), (None, 2)], &["10.0.0.4"]),
        ];
        let urls: Vec<String> = endpoint_urls(&url, 8080, &slices)
            .iter()
            .map(url::Url::to_string)
            .collect();
        assert_eq!(
            urls,
            [
                "http://10.0.0.1:8080/api/v1?x=1",
                "http://10.0.0.2:8080/api/v1?x=1",
                "http://10.0.0.3:9090/api/v1?x=1",
                "http://[fd00::1]:9090/api/v1?x=1",
                "http://10.0.0.4:8080/api/v1?x=1",
            ]
        );
    }

    #[test]
    fn aggregations_combine_as_keda() {
        let values = [2.0, 8.0, 5.0];
        assert_eq!(Aggregation::Average.combine(&values), 5.0);
        assert_eq!(Aggregation::Sum.combine(&values), 15.0);
        assert_eq!(Aggregation::Max.combine(&values), 8.0);
        assert_eq!(Aggregation::Min.combine(&values), 2.0);
    }
}
