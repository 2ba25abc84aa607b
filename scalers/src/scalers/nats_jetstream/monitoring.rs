//! The NATS server's monitoring API as the `nats-jetstream` scaler reads it: the URLs KEDA
//! builds, the parts of `/jsz` and `/varz` it uses, the consumer lag, and the cluster nodes to
//! ask for the consumer leader.

use serde::Deserialize;
use url::Url;

/// `/jsz?acc=<account>&consumers=true&config=true`: JetStream state of one account.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct Jsz {
    /// The accounts the server reports (it may report others than the one asked for).
    #[serde(default)]
    pub account_details: Vec<AccountDetail>,
    /// The JetStream meta cluster; absent on a server that is not clustered.
    #[serde(default)]
    pub meta_cluster: MetaCluster,
}

/// `meta_cluster` of `/jsz`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct MetaCluster {
    /// Number of JetStream servers in the cluster; 0 or 1 when not clustered.
    #[serde(default)]
    pub cluster_size: u64,
}

/// One account of `/jsz`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct AccountDetail {
    /// The account's name (`$G` without accounts).
    #[serde(default)]
    pub name: String,
    /// The account's id (its public key with operator mode, else the name).
    #[serde(default)]
    pub id: String,
    /// Its streams.
    #[serde(default)]
    pub stream_detail: Vec<StreamDetail>,
}

/// One stream of an account.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct StreamDetail {
    /// The stream's name.
    #[serde(default)]
    pub name: String,
    /// Message counters.
    #[serde(default)]
    pub state: StreamState,
    /// Its consumers.
    #[serde(default)]
    pub consumer_detail: Vec<ConsumerDetail>,
    /// Its configuration (`config=true`).
    #[serde(default)]
    pub config: StreamConfig,
}

/// `config` of a stream: the subjects it captures (the early wake-up subscribes to them).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct StreamConfig {
    /// Subject filters (may hold the wildcards `*` and `>`); none for a mirror.
    #[serde(default)]
    pub subjects: Vec<String>,
}

/// `state` of a stream.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct StreamState {
    /// Sequence number of the last message stored.
    #[serde(default)]
    pub last_seq: u64,
}

/// One consumer of a stream.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct ConsumerDetail {
    /// The consumer's name.
    #[serde(default)]
    pub name: String,
    /// Messages not yet delivered to the consumer.
    #[serde(default)]
    pub num_pending: u64,
    /// Messages delivered but not acknowledged yet.
    #[serde(default)]
    pub num_ack_pending: u64,
    /// Its Raft group; absent when not clustered.
    #[serde(default)]
    pub cluster: ConsumerCluster,
}

/// `cluster` of a consumer.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct ConsumerCluster {
    /// The server name of the consumer's leader.
    #[serde(default)]
    pub leader: String,
}

/// The parts of `/varz` used to find the cluster's nodes.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct Varz {
    /// This server's name.
    #[serde(default)]
    pub server_name: String,
    /// This server's client port.
    #[serde(default)]
    pub port: u16,
    /// Client URLs (`host:port`) the cluster advertises, one per server.
    #[serde(default)]
    pub connect_urls: Vec<String>,
    /// The cluster (route) configuration.
    #[serde(default)]
    pub cluster: VarzCluster,
}

/// `cluster` of `/varz`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct VarzCluster {
    /// Route URLs (`host:port`) of the other servers.
    #[serde(default)]
    pub urls: Vec<String>,
}

/// Which stream and consumer of which account a trigger reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// `account`.
    pub account: String,
    /// `accountID`, or `account` when absent.
    pub account_id: String,
    /// `stream`.
    pub stream: String,
    /// `consumer`.
    pub consumer: String,
}

impl Target {
    /// KEDA's `IsAccount`: the account's id is `accountID` or its name is `account`.
    fn is_account(&self, account: &AccountDetail) -> bool {
        account.id == self.account_id || account.name == self.account
    }

    /// The trigger's stream in `jsz`.
    pub fn stream<'a>(&self, jsz: &'a Jsz) -> Option<&'a StreamDetail> {
        jsz.account_details
            .iter()
            .filter(|a| self.is_account(a))
            .flat_map(|a| &a.stream_detail)
            .find(|s| s.name == self.stream)
    }

    /// The trigger's consumer in `jsz`.
    pub fn consumer<'a>(&self, jsz: &'a Jsz) -> Option<&'a ConsumerDetail> {
        self.stream(jsz)?
            .consumer_detail
            .iter()
            .find(|c| c.name == self.consumer)
    }

    /// KEDA's `getMaxMsgLag`: the consumer's `num_pending + num_ack_pending`; when the stream
    /// has no such consumer (yet), the stream's last sequence number, so a workload whose
    /// consumer is created when it starts still scales from zero. `None` when the stream is
    /// not there.
    pub fn lag(&self, jsz: &Jsz) -> Option<u64> {
        let stream = self.stream(jsz)?;
        Some(
            match stream
                .consumer_detail
                .iter()
                .find(|c| c.name == self.consumer)
            {
                Some(c) => c.num_pending.saturating_add(c.num_ack_pending),
                None => stream.state.last_seq,
            },
        )
    }
}

/// The monitoring endpoint of a trigger: `http(s)://<natsServerMonitoringEndpoint>`, and the
/// URLs built from it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Endpoint {
    scheme: &'static str,
    /// `host[:port]` as configured.
    authority: String,
    /// The host alone (IPv6 without brackets).
    host: String,
    /// The port, if configured.
    port: Option<u16>,
}

impl Endpoint {
    /// Parses `host[:port]`.
    ///
    /// # Errors
    /// A message saying what is wrong (a scheme or path given, no host).
    pub fn parse(endpoint: &str, https: bool) -> Result<Self, String> {
        if endpoint.contains("://") {
            return Err("must be host:port without a scheme (set useHttps for https)".to_string());
        }
        let scheme = if https { "https" } else { "http" };
        let url = Url::parse(&format!("{scheme}://{endpoint}"))
            .map_err(|e| format!("is not a valid host:port: {e}"))?;
        if url.path() != "/" || url.query().is_some() || !url.username().is_empty() {
            return Err("must be host:port, without a path, query or user".to_string());
        }
        let host = match url.host() {
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            Some(host) => host.to_string(),
            None => return Err("has no host".to_string()),
        };
        Ok(Self {
            scheme,
            authority: endpoint.to_string(),
            host,
            port: url.port(),
        })
    }

    /// The endpoint's host (IPv6 without brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// `scheme://host:port` of this endpoint, for messages.
    pub fn base(&self) -> String {
        format!("{}://{}", self.scheme, self.authority)
    }

    /// `host` with this endpoint's port: where the monitoring port of another cluster node is,
    /// since every node uses the same one.
    fn on_host(&self, host: &str) -> String {
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host.to_string()
        };
        match self.port {
            Some(port) => format!("{host}:{port}"),
            None => host,
        }
    }

    fn url(&self, authority: &str, path: &str, account_id: Option<&str>) -> Result<Url, String> {
        let mut url = Url::parse(&format!("{}://{authority}{path}", self.scheme)).map_err(|e| {
            format!(
                "{}://{authority}{path} is not a valid URL: {e}",
                self.scheme
            )
        })?;
        if let Some(id) = account_id {
            // The order of Go's url.Values.Encode (sorted keys).
            url.query_pairs_mut()
                .append_pair("acc", id)
                .append_pair("config", "true")
                .append_pair("consumers", "true");
        }
        Ok(url)
    }

    /// `/jsz` of this endpoint for `account_id`.
    ///
    /// # Errors
    /// Never for a parsed endpoint; the `Result` keeps the URL building in one place.
    pub fn jsz(&self, account_id: &str) -> Result<Url, String> {
        self.url(&self.authority, "/jsz", Some(account_id))
    }

    /// `/varz` of this endpoint.
    ///
    /// # Errors
    /// As [`Endpoint::jsz`].
    pub fn varz(&self) -> Result<Url, String> {
        self.url(&self.authority, "/varz", None)
    }

    /// The nodes of the cluster `varz` (this endpoint's answer) describes, in KEDA's order
    /// (`getNATSJetstreamMonitoringData`):
    ///
    /// - the advertised client URLs (`connect_urls`): each node's monitoring port is this
    ///   endpoint's port on that URL's host, and its name is read from its own `/varz`;
    /// - without them, the route URLs (`cluster.urls`): the node's name is the first label of
    ///   the route's host and its monitoring endpoint is `<name>.<this endpoint>` (the pods of
    ///   a StatefulSet behind a headless Service).
    ///
    /// # Errors
    /// A URL cannot be built from what the server reported.
    pub fn cluster_nodes(&self, varz: &Varz, account_id: &str) -> Result<Vec<Node>, String> {
        if !varz.connect_urls.is_empty() {
            return varz
                .connect_urls
                .iter()
                .map(|advertised| {
                    let authority = self.on_host(host_of(advertised));
                    Ok(Node {
                        name: None,
                        varz: Some(self.url(&authority, "/varz", None)?),
                        jsz: self.url(&authority, "/jsz", Some(account_id))?,
                    })
                })
                .collect();
        }
        varz.cluster
            .urls
            .iter()
            .map(|route| {
                let name = host_of(route).split('.').next().unwrap_or_default();
                let authority = format!("{name}.{}", self.authority);
                Ok(Node {
                    name: Some(name.to_string()),
                    varz: None,
                    jsz: self.url(&authority, "/jsz", Some(account_id))?,
                })
            })
            .collect()
    }
}

/// `host` of `host:port`, `[v6]:port` or a bare host.
fn host_of(address: &str) -> &str {
    if let Some(rest) = address.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match address.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            host
        }
        _ => address,
    }
}

/// A node of a JetStream cluster to ask whether it leads the consumer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// Its server name, when known without asking it.
    pub name: Option<String>,
    /// Its `/varz`, to read the name from.
    pub varz: Option<Url>,
    /// Its `/jsz` for the trigger's account.
    pub jsz: Url,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target {
            account: "$G".into(),
            account_id: "$G".into(),
            stream: "orders".into(),
            consumer: "workers".into(),
        }
    }

    const JSZ: &str = r#"{
      "meta_cluster": {"name": "c", "leader": "n3", "cluster_size": 3},
      "account_details": [
        {"name": "other", "id": "other", "stream_detail": [
          {"name": "orders", "state": {"last_seq": 99}, "consumer_detail": []}]},
        {"name": "$G", "id": "$G", "stream_detail": [
          {"name": "orders", "state": {"messages": 7, "last_seq": 12},
           "consumer_detail": [
             {"name": "workers", "num_pending": 5, "num_ack_pending": 2,
              "cluster": {"name": "c", "leader": "n1"}},
             {"name": "audit", "num_pending": 0, "num_ack_pending": 0}]}]}
      ]
    }"#;

    #[test]
    fn lag_is_pending_plus_ack_pending_of_the_consumer_in_the_account() {
        let jsz: Jsz = serde_json::from_str(JSZ).unwrap();
        assert_eq!(jsz.meta_cluster.cluster_size, 3);
        assert_eq!(target().lag(&jsz), Some(7));
        assert_eq!(target().consumer(&jsz).unwrap().cluster.leader, "n1");
    }

    #[test]
    fn a_missing_consumer_counts_the_whole_stream_and_a_missing_stream_is_none() {
        let jsz: Jsz = serde_json::from_str(JSZ).unwrap();
        let missing_consumer = Target {
            consumer: "nobody".into(),
            ..target()
        };
        assert_eq!(missing_consumer.lag(&jsz), Some(12));
        let missing_stream = Target {
            stream: "nope".into(),
            ..target()
        };
        assert_eq!(missing_stream.lag(&jsz), None);
        // The account is matched by id or by name.
        let by_id = Target {
            account: "someone".into(),
            account_id: "other".into(),
            consumer: "x".into(),
            ..target()
        };
        assert_eq!(by_id.lag(&jsz), Some(99));
    }

    #[test]
    fn a_standalone_answer_has_no_cluster() {
        let jsz: Jsz = serde_json::from_str(r#"{"account_details": []}"#).unwrap();
        assert_eq!(jsz.meta_cluster.cluster_size, 0);
    }

    #[test]
    fn urls_follow_keda() {
        let e = Endpoint::parse("nats.nats.svc:8222", false).unwrap();
        assert_eq!(
            e.jsz("$G").unwrap().as_str(),
            "http://nats.nats.svc:8222/jsz?acc=%24G&config=true&consumers=true"
        );
        assert_eq!(e.varz().unwrap().as_str(), "http://nats.nats.svc:8222/varz");
        let e = Endpoint::parse("[::1]:8222", true).unwrap();
        assert_eq!(
            e.jsz("A B").unwrap().as_str(),
            "https://[::1]:8222/jsz?acc=A+B&config=true&consumers=true"
        );
        assert_eq!(e.base(), "https://[::1]:8222");
    }

    #[test]
    fn endpoints_with_a_scheme_or_path_are_rejected() {
        for bad in [
            "http://nats:8222",
            "nats:8222/jsz",
            "user@nats:8222",
            "nats:99999",
            "",
        ] {
            assert!(Endpoint::parse(bad, false).is_err(), "{bad}");
        }
        assert!(Endpoint::parse("nats", false).is_ok());
    }

    #[test]
    fn advertised_nodes_use_the_endpoints_monitoring_port_on_their_host() {
        let e = Endpoint::parse("127.0.0.1:8222", false).unwrap();
        let varz = Varz {
            connect_urls: vec![
                "127.0.0.2:4222".into(),
                "nats-1.nats.svc:4222".into(),
                "[fd00::1]:4222".into(),
            ],
            cluster: VarzCluster {
                urls: vec!["ignored:6222".into()],
            },
            ..Varz::default()
        };
        let nodes = e.cluster_nodes(&varz, "$G").unwrap();
        let urls: Vec<(Option<&str>, &str)> = nodes
            .iter()
            .map(|n| (n.varz.as_ref().map(Url::as_str), n.jsz.as_str()))
            .collect();
        assert_eq!(
            urls,
            [
                (
                    Some("http://127.0.0.2:8222/varz"),
                    "http://127.0.0.2:8222/jsz?acc=%24G&config=true&consumers=true"
                ),
                (
                    Some("http://nats-1.nats.svc:8222/varz"),
                    "http://nats-1.nats.svc:8222/jsz?acc=%24G&config=true&consumers=true"
                ),
                (
                    Some("http://[fd00::1]:8222/varz"),
                    "http://[fd00::1]:8222/jsz?acc=%24G&config=true&consumers=true"
                ),
            ]
        );
        assert!(nodes.iter().all(|n| n.name.is_none()));
    }

    #[test]
    fn without_advertised_urls_nodes_are_named_after_their_routes() {
        let e = Endpoint::parse("nats.nats.svc:8222", false).unwrap();
        let varz = Varz {
            cluster: VarzCluster {
                urls: vec!["nats-1.nats.nats.svc:6222".into(), "nats-2:6222".into()],
            },
            ..Varz::default()
        };
        let nodes = e.cluster_nodes(&varz, "$G").unwrap();
        assert_eq!(nodes[0].name.as_deref(), Some("nats-1"));
        assert_eq!(
            nodes[0].jsz.as_str(),
            "http://nats-1.nats.nats.svc:8222/jsz?acc=%24G&config=true&consumers=true"
        );
        assert_eq!(nodes[1].name.as_deref(), Some("nats-2"));
        assert!(nodes[1].varz.is_none());
    }

    #[test]
    fn hosts_of_addresses() {
        for (address, host) in [
            ("a:1", "a"),
            ("a", "a"),
            ("[::1]:4222", "::1"),
            ("::1", "::1"),
            ("1.2.3.4:5", "1.2.3.4"),
        ] {
            assert_eq!(host_of(address), host, "{address}");
        }
    }
}
