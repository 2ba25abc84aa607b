//! Redis connection settings shared by the list and stream scalers (standalone, cluster,
//! sentinel), parsed with KEDA's parameter names, and the pooled client built from them.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{SentinelClientBuilder, SentinelServerType};
use redis::{
    Client, ConnectionAddr, ConnectionInfo, FromRedisValue, IntoConnectionInfo, RedisResult,
    TlsCertificates, TlsMode,
};

use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError};
use crate::metadata::{AUTH, METADATA_AUTH_ENV, METADATA_ENV_AUTH, MetadataParser, Param};
use crate::pool::Lease;
use crate::remote::Classify;
use crate::secret::Secret;

/// go-redis' defaults, which KEDA uses.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
pub(super) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(3);

pub(super) const ADDRESS: Param = Param::optional("address")
    .aliases(&["addresses"])
    .order(METADATA_AUTH_ENV);
pub(super) const HOST: Param = Param::optional("host")
    .aliases(&["hosts"])
    .order(METADATA_ENV_AUTH);
pub(super) const PORT: Param = Param::optional("port")
    .aliases(&["ports"])
    .order(METADATA_ENV_AUTH);
pub(super) const USERNAME: Param = Param::optional("username").order(METADATA_ENV_AUTH);
pub(super) const PASSWORD: Param = Param::optional("password")
    .order(METADATA_ENV_AUTH)
    .secret();
pub(super) const SENTINEL_USERNAME: Param =
    Param::optional("sentinelUsername").order(METADATA_AUTH_ENV);
pub(super) const SENTINEL_PASSWORD: Param = Param::optional("sentinelPassword")
    .order(METADATA_AUTH_ENV)
    .secret();
pub(super) const SENTINEL_MASTER: Param =
    Param::optional("sentinelMaster").order(METADATA_AUTH_ENV);
pub(super) const DATABASE_INDEX: Param = Param::optional("databaseIndex")
    .default("0")
    .range(0.0, f64::MAX);
pub(super) const ENABLE_TLS: Param = Param::optional("enableTLS");
pub(super) const TLS: Param = Param::optional("tls")
    .order(AUTH)
    .allowed(&["enable", "disable"]);
pub(super) const UNSAFE_SSL: Param = Param::optional("unsafeSsl").default("false");
pub(super) const CA: Param = Param::optional("ca").order(AUTH).secret();
pub(super) const CERT: Param = Param::optional("cert")
    .aliases(&["Cert"])
    .order(AUTH)
    .secret();
pub(super) const KEY: Param = Param::optional("key").order(AUTH).secret();
pub(super) const KEY_PASSWORD: Param = Param::optional("keyPassword").order(AUTH).secret();

/// The connection parameters of every Redis trigger type.
pub(super) const CONNECTION_PARAMS: &[Param] = &[
    ADDRESS,
    HOST,
    PORT,
    USERNAME,
    PASSWORD,
    SENTINEL_USERNAME,
    SENTINEL_PASSWORD,
    SENTINEL_MASTER,
    DATABASE_INDEX,
    ENABLE_TLS,
    TLS,
    UNSAFE_SSL,
    CA,
    CERT,
    KEY,
    KEY_PASSWORD,
];

/// Standalone, cluster or sentinel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Topology {
    /// One server (`redis`, `redis-streams`).
    Standalone,
    /// A Redis Cluster (`redis-cluster`, `redis-cluster-streams`).
    Cluster,
    /// Servers found through Sentinel (`redis-sentinel`, `redis-sentinel-streams`).
    Sentinel,
}

/// TLS settings, part of the pool key (shared with the other scalers).
pub use crate::tls::TlsSettings;

/// Everything that identifies a Redis client: the pool key. Two triggers with equal settings
/// share one connection.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RedisSettings {
    /// Topology.
    pub topology: Topology,
    /// `host:port` nodes (sentinels for [`Topology::Sentinel`]).
    pub nodes: Vec<(String, u16)>,
    /// ACL user.
    pub username: Option<String>,
    /// Password.
    pub password: Option<Secret>,
    /// Database (not used by clusters).
    pub database: i64,
    /// TLS, if enabled.
    pub tls: Option<TlsSettings>,
    /// Sentinel master name, user and password.
    pub sentinel: Option<(String, Option<String>, Option<Secret>)>,
}

impl RedisSettings {
    /// Parses the connection parameters of a Redis trigger.
    pub(super) fn parse(p: &MetadataParser<'_>, topology: Topology) -> Result<Self, MetadataError> {
        p.one_of(&[&ADDRESS, &HOST])?;
        let nodes = match p.get_opt::<Vec<String>>(&ADDRESS)? {
            Some(addresses) => addresses
                .iter()
                .map(|a| split_host_port(p, a))
                .collect::<Result<Vec<_>, _>>()?,
            None => {
                let hosts: Vec<String> = p.get(&HOST)?;
                let ports: Vec<u16> = p
                    .get::<Vec<String>>(&PORT.require())?
                    .iter()
                    .map(|port| {
                        port.parse::<u16>()
                            .map_err(|_| invalid(p, &PORT, "a valid port (0 to 65535)"))
                    })
                    .collect::<Result<_, _>>()?;
                if hosts.len() != ports.len() {
                    return Err(p.rule(format!(
                        "parameters \"host\" and \"port\" must list the same number of entries ({} hosts, {} ports)",
                        hosts.len(),
                        ports.len()
                    )));
                }
                hosts.into_iter().zip(ports).collect()
            }
        };
        let mut nodes = nodes;
        if topology == Topology::Standalone {
            // KEDA's standalone client connects to the first address and ignores the rest.
            nodes.truncate(1);
        }

        p.exclusive(&[&ENABLE_TLS, &TLS])?;
        let tls_enabled = p.get_opt::<bool>(&ENABLE_TLS)?.unwrap_or(false)
            || p.get_opt::<String>(&TLS)?.as_deref() == Some("enable");
        let client = crate::tls::client_identity(
            p.get_opt::<Secret>(&CERT)?,
            p.get_opt::<Secret>(&KEY)?,
            // As in KEDA, the key is decrypted only when TLS is enabled.
            if tls_enabled {
                p.get_opt::<Secret>(&KEY_PASSWORD)?
            } else {
                None
            },
        )
        .map_err(|e| p.rule(e.to_string()))?;
        let tls = tls_enabled.then(|| -> Result<TlsSettings, MetadataError> {
            Ok(TlsSettings {
                insecure: p.get(&UNSAFE_SSL)?,
                ca: p.get_opt(&CA)?,
                client: client.clone(),
            })
        });
        let tls = tls.transpose()?;

        let sentinel = match topology {
            Topology::Sentinel => Some((
                p.get::<String>(&SENTINEL_MASTER.require())?,
                p.get_opt(&SENTINEL_USERNAME)?,
                p.get_opt(&SENTINEL_PASSWORD)?,
            )),
            _ => None,
        };
        Ok(Self {
            topology,
            nodes,
            username: p.get_opt(&USERNAME)?,
            password: p.get_opt(&PASSWORD)?,
            database: match topology {
                // Clusters have only database 0; KEDA ignores databaseIndex there.
                Topology::Cluster => 0,
                _ => p.get(&DATABASE_INDEX)?,
            },
            tls,
            sentinel,
        })
    }

    /// `redis at host:port[,host:port]`, for errors; never includes credentials.
    pub fn describe(&self) -> String {
        let nodes: Vec<String> = self.nodes.iter().map(|(h, p)| format!("{h}:{p}")).collect();
        let what = match self.topology {
            Topology::Standalone => "redis",
            Topology::Cluster => "redis cluster",
            Topology::Sentinel => "redis sentinel",
        };
        format!("{what} at {}", nodes.join(","))
    }

    fn addr(&self, host: &str, port: u16) -> ConnectionAddr {
        match &self.tls {
            Some(tls) => ConnectionAddr::TcpTls {
                host: host.to_string(),
                port,
                insecure: tls.insecure,
                tls_params: None,
            },
            None => ConnectionAddr::Tcp(host.to_string(), port),
        }
    }

    fn redis_info(&self, addr: ConnectionAddr) -> RedisResult<ConnectionInfo> {
        let info = addr.into_connection_info()?;
        let mut redis = info.redis_settings().clone().set_db(self.database);
        if let Some(user) = &self.username {
            redis = redis.set_username(user);
        }
        if let Some(password) = &self.password {
            redis = redis.set_password(password.expose());
        }
        Ok(info.set_redis_settings(redis))
    }

    fn certificates(&self) -> Option<TlsCertificates> {
        let tls = self.tls.as_ref()?;
        if tls.ca.is_none() && tls.client.is_none() {
            return None;
        }
        Some(TlsCertificates {
            client_tls: tls
                .client
                .as_ref()
                .map(|(cert, key)| redis::ClientTlsConfig {
                    client_cert: cert.expose().as_bytes().to_vec(),
                    client_key: key.expose().as_bytes().to_vec(),
                }),
            root_cert: tls.ca.as_ref().map(|ca| ca.expose().as_bytes().to_vec()),
        })
    }

    /// The client of a standalone server (the first node), not connected yet.
    pub(super) fn standalone_client(&self) -> RedisResult<Client> {
        let (host, port) = self.nodes.first().cloned().unwrap_or_default();
        let info = self.redis_info(self.addr(&host, port))?;
        match self.certificates() {
            Some(certs) => Client::build_with_tls(info, certs),
            None => Client::open(info),
        }
    }

    /// Connects. Called by the pool only when no client for these settings exists.
    pub(super) async fn connect(&self) -> RedisResult<RedisClient> {
        match self.topology {
            Topology::Standalone => {
                let client = self.standalone_client()?;
                // Few, short retries (as go-redis: 3): a failed build is retried at the next
                // poll anyway, and the error should reach the user's condition quickly.
                let config = ConnectionManagerConfig::new()
                    .set_number_of_retries(3)
                    .set_max_delay(Duration::from_secs(1))
                    .set_connection_timeout(Some(CONNECT_TIMEOUT))
                    .set_response_timeout(Some(RESPONSE_TIMEOUT));
                let manager = client.get_connection_manager_with_config(config).await?;
                Ok(RedisClient::Single(manager))
            }
            Topology::Cluster => {
                let nodes: Vec<ConnectionInfo> = self
                    .nodes
                    .iter()
                    .map(|(h, p)| ConnectionAddr::Tcp(h.clone(), *p).into_connection_info())
                    .collect::<RedisResult<_>>()?;
                let mut builder = redis::cluster::ClusterClient::builder(nodes)
                    .connection_timeout(CONNECT_TIMEOUT)
                    .response_timeout(RESPONSE_TIMEOUT);
                if let Some(user) = &self.username {
                    builder = builder.username(user);
                }
                if let Some(password) = &self.password {
                    builder = builder.password(password.expose());
                }
                if let Some(tls) = &self.tls {
                    builder = builder.tls(if tls.insecure {
                        TlsMode::Insecure
                    } else {
                        TlsMode::Secure
                    });
                    if let Some(certs) = self.certificates() {
                        builder = builder.certs(certs);
                    }
                }
                let connection = builder.build()?.get_async_connection().await?;
                Ok(RedisClient::Cluster(connection))
            }
            Topology::Sentinel => {
                let (master, s_user, s_password) = self.sentinel.clone().unwrap_or_default();
                let sentinels: Vec<ConnectionAddr> =
                    self.nodes.iter().map(|(h, p)| self.addr(h, *p)).collect();
                let mut builder =
                    SentinelClientBuilder::new(sentinels, master, SentinelServerType::Master)?
                        .set_client_to_redis_db(self.database);
                if let Some(user) = &self.username {
                    builder = builder.set_client_to_redis_username(user);
                }
                if let Some(password) = &self.password {
                    builder = builder.set_client_to_redis_password(password.expose());
                }
                if let Some(user) = &s_user {
                    builder = builder.set_client_to_sentinel_username(user);
                }
                if let Some(password) = &s_password {
                    builder = builder.set_client_to_sentinel_password(password.expose());
                }
                if let Some(tls) = &self.tls {
                    let mode = if tls.insecure {
                        TlsMode::Insecure
                    } else {
                        TlsMode::Secure
                    };
                    builder = builder
                        .set_client_to_redis_tls_mode(mode)
                        .set_client_to_sentinel_tls_mode(mode);
                    if let Some(certs) = self.certificates() {
                        builder = builder
                            .set_client_to_redis_certificates(certs.clone())
                            .set_client_to_sentinel_certificates(certs);
                    }
                }
                let mut client = builder.build()?;
                let connection = client.get_async_connection().await?;
                Ok(RedisClient::Sentinel(Arc::new(SentinelState {
                    client: tokio::sync::Mutex::new(client),
                    connection: tokio::sync::Mutex::new(Some(connection)),
                })))
            }
        }
    }
}

/// The error for a value of `param` that is not `expected`. The value is named only where
/// [`MetadataParser::invalid`] shows values: never one from a TriggerAuthentication (the fuzz
/// target `scaler_metadata` found a `port` from a Secret echoed here).
fn invalid(p: &MetadataParser<'_>, param: &Param, expected: &str) -> MetadataError {
    match p.find(param) {
        Ok(Some(found)) => p.invalid(param, found, expected),
        Ok(None) => p.rule(format!(
            "parameter \"{}\" is not {expected}",
            param.names().next().unwrap_or_default()
        )),
        Err(error) => error,
    }
}

fn split_host_port(p: &MetadataParser<'_>, address: &str) -> Result<(String, u16), MetadataError> {
    let invalid = || invalid(p, &ADDRESS, "a valid host:port address");
    let (host, port) = address.rsplit_once(':').ok_or_else(invalid)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = port.parse::<u16>().map_err(|_| invalid())?;
    if host.is_empty() {
        return Err(invalid());
    }
    Ok((host.to_string(), port))
}

/// A master connection found through Sentinel, re-resolved after a connection error so a
/// failover is followed.
pub struct SentinelState {
    client: tokio::sync::Mutex<redis::sentinel::SentinelClient>,
    connection: tokio::sync::Mutex<Option<MultiplexedConnection>>,
}

/// A pooled Redis client; cheap to clone for one command.
#[derive(Clone)]
pub enum RedisClient {
    /// A standalone server, reconnected automatically.
    Single(ConnectionManager),
    /// A cluster, routed by key.
    Cluster(ClusterConnection),
    /// A sentinel-managed master.
    Sentinel(Arc<SentinelState>),
}

impl RedisClient {
    /// Runs `cmd` (or a script invocation) and parses its reply.
    pub(super) async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd) -> RedisResult<T> {
        match self {
            Self::Single(c) => cmd.query_async(&mut c.clone()).await,
            Self::Cluster(c) => cmd.query_async(&mut c.clone()).await,
            Self::Sentinel(state) => {
                let mut guard = state.connection.lock().await;
                let mut connection = match guard.as_ref() {
                    Some(c) => c.clone(),
                    None => {
                        let c = state.client.lock().await.get_async_connection().await?;
                        *guard = Some(c.clone());
                        c
                    }
                };
                drop(guard);
                let result = cmd.query_async(&mut connection).await;
                if let Err(e) = &result
                    && (e.is_io_error() || e.is_connection_dropped() || e.is_timeout())
                {
                    // Ask the sentinels for the master again on the next call.
                    *state.connection.lock().await = None;
                }
                result
            }
        }
    }
}

/// A shared client leased from the pool.
pub(super) type RedisLease = Lease<RedisSettings, RedisClient>;

/// Leases the client for `settings`, connecting if this is its first user.
pub(super) async fn lease(
    ctx: &ScalerContext,
    settings: &RedisSettings,
) -> Result<RedisLease, ScalerError> {
    ctx.clients
        .pool::<RedisSettings, RedisClient>()
        .get_or_connect(settings.clone(), || settings.connect())
        .await
        .map_err(|e| ScalerError::Connect {
            trigger: ctx.trigger_id(),
            target: settings.describe(),
            source: e.classify(),
        })
}

/// Holds the lease until `close`, so queries after `close` fail with
/// [`ScalerError::Closed`].
pub(super) struct Held(std::sync::Mutex<Option<RedisLease>>);

impl Held {
    pub(super) fn new(lease: RedisLease) -> Self {
        Self(std::sync::Mutex::new(Some(lease)))
    }

    /// A clone of the client for one call, or `None` after close.
    pub(super) fn client(&self) -> Option<RedisClient> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(|lease| RedisClient::clone(lease))
    }

    /// Releases the lease; the last one closes the connection.
    pub(super) fn release(&self) {
        let lease = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        drop(lease);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::error::TriggerId;

    fn parse(
        topology: Topology,
        metadata: &[(&str, &str)],
        env: &[(&str, &str)],
        auth: &[(&str, &str)],
    ) -> Result<RedisSettings, String> {
        let id = TriggerId {
            index: 0,
            trigger_type: "redis".into(),
        };
        let m: BTreeMap<String, String> = metadata
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let e: BTreeMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let a: BTreeMap<String, Secret> = auth
            .iter()
            .map(|(k, v)| (k.to_string(), Secret::new(*v)))
            .collect();
        RedisSettings::parse(&MetadataParser::new(&id, &m, &e, &a), topology)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn addresses_hosts_and_ports() {
        let s = parse(Topology::Standalone, &[("address", "r:6380")], &[], &[]).unwrap();
        assert_eq!(s.nodes, vec![("r".to_string(), 6380)]);
        let s = parse(
            Topology::Standalone,
            &[("hostFromEnv", "H"), ("port", "6379")],
            &[("H", "h1")],
            &[],
        )
        .unwrap();
        assert_eq!(s.nodes, vec![("h1".to_string(), 6379)]);
        let s = parse(
            Topology::Cluster,
            &[("hosts", "a, b"), ("ports", "1,2")],
            &[],
            &[],
        )
        .unwrap();
        assert_eq!(s.nodes, vec![("a".to_string(), 1), ("b".to_string(), 2)]);
        let s = parse(Topology::Cluster, &[("addresses", "a:1,b:2")], &[], &[]).unwrap();
        assert_eq!(s.nodes.len(), 2);
        assert_eq!(s.database, 0);
    }

    #[test]
    fn a_standalone_redis_with_several_addresses_uses_the_first_as_keda_does() {
        let s = parse(Topology::Standalone, &[("addresses", "a:1, b:2")], &[], &[]).unwrap();
        assert_eq!(s.nodes, vec![("a".to_string(), 1)]);
        let s = parse(
            Topology::Standalone,
            &[("hosts", "h1,h2"), ("ports", "1,2")],
            &[],
            &[],
        )
        .unwrap();
        assert_eq!(s.nodes, vec![("h1".to_string(), 1)]);
    }

    #[test]
    fn connection_errors_name_the_parameter() {
        for (topology, metadata, auth, expected) in [
            (
                Topology::Standalone,
                vec![],
                vec![],
                r#"trigger 0 (redis): missing required parameter: one of "address", "addresses", "host" and "hosts""#,
            ),
            (
                Topology::Standalone,
                vec![("address", "nohost")],
                vec![],
                r#"trigger 0 (redis): parameter "address": "nohost" is not a valid host:port address"#,
            ),
            (
                Topology::Standalone,
                vec![("host", "h")],
                vec![],
                r#"trigger 0 (redis): missing required parameter "port""#,
            ),
            (
                Topology::Standalone,
                vec![("host", "h"), ("port", "63x79")],
                vec![],
                r#"trigger 0 (redis): parameter "port": "63x79" is not a valid port (0 to 65535)"#,
            ),
            // A value from a TriggerAuthentication (a Secret) is never shown.
            (
                Topology::Standalone,
                vec![("host", "h")],
                vec![("port", "s3cret-value")],
                r#"trigger 0 (redis): parameter "port": the value from TriggerAuthentication is not a valid port (0 to 65535)"#,
            ),
            (
                Topology::Standalone,
                vec![],
                vec![("address", "s3cret-value")],
                r#"trigger 0 (redis): parameter "address": the value from TriggerAuthentication is not a valid host:port address"#,
            ),
            (
                Topology::Cluster,
                vec![("hosts", "a,b"), ("ports", "1")],
                vec![],
                "trigger 0 (redis): parameters \"host\" and \"port\" must list the same number of entries (2 hosts, 1 ports)",
            ),
            (
                Topology::Standalone,
                vec![("address", "a:1"), ("enableTLS", "true")],
                vec![("tls", "enable")],
                r#"trigger 0 (redis): parameters "enableTLS" and "tls" cannot be used together"#,
            ),
            (
                Topology::Standalone,
                vec![("address", "a:1"), ("enableTLS", "yes")],
                vec![],
                r#"trigger 0 (redis): parameter "enableTLS": "yes" is not a valid boolean"#,
            ),
            (
                Topology::Standalone,
                vec![("address", "a:1")],
                vec![("tls", "on")],
                r#"trigger 0 (redis): parameter "tls": the value from TriggerAuthentication is not one of enable, disable"#,
            ),
            (
                Topology::Standalone,
                vec![("address", "a:1")],
                vec![("cert", "C")],
                r#"trigger 0 (redis): parameters "cert" and "key" must be given together"#,
            ),
            (
                Topology::Sentinel,
                vec![("addresses", "a:1,b:2")],
                vec![],
                r#"trigger 0 (redis): missing required parameter "sentinelMaster""#,
            ),
            (
                Topology::Standalone,
                vec![("address", "a:1"), ("databaseIndex", "-1")],
                vec![],
                r#"trigger 0 (redis): parameter "databaseIndex": "-1" is not at least 0"#,
            ),
        ] {
            assert_eq!(
                parse(topology, &metadata, &[], &auth).unwrap_err(),
                expected
            );
        }
    }

    #[test]
    fn tls_settings_and_credentials() {
        let s = parse(
            Topology::Sentinel,
            &[
                ("addresses", "s1:26379"),
                ("sentinelMaster", "mymaster"),
                ("unsafeSsl", "true"),
                ("passwordFromEnv", "P"),
            ],
            &[("P", "pw")],
            &[
                ("tls", "enable"),
                ("ca", "CA"),
                ("cert", "C"),
                ("key", "K"),
                ("sentinelPassword", "sp"),
            ],
        )
        .unwrap();
        let tls = s.tls.as_ref().unwrap();
        assert!(tls.insecure);
        assert_eq!(tls.ca.as_ref().map(Secret::expose), Some("CA"));
        assert_eq!(s.password.as_ref().map(Secret::expose), Some("pw"));
        let (master, _, sp) = s.sentinel.as_ref().unwrap();
        assert_eq!(
            (master.as_str(), sp.as_ref().map(Secret::expose)),
            ("mymaster", Some("sp"))
        );
        assert!(!format!("{s:?}").contains("pw"));
        assert_eq!(s.describe(), "redis sentinel at s1:26379");
    }
}
