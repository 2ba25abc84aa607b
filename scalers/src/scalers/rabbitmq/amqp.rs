//! One shared AMQP connection per broker (URL with credentials, vhost, TLS settings), and the
//! passive queue declare that reads a queue's ready messages.
//!
//! The connection is opened on first use and re-opened on the next call after it broke (the
//! broker restarted, a network error): a broken connection is never kept. Queries use a small
//! pool of channels so concurrent triggers do not wait for each other; a channel the broker
//! closed (a passive declare of a missing queue closes it with 404) is dropped, not reused.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lapin::options::QueueDeclareOptions;
use lapin::tcp::{AsyncTcpStream, RustlsConnector};
use lapin::types::FieldTable;
use lapin::uri::{AMQPScheme, AMQPUri, SASLMechanism};
use lapin::{Channel, Connection, ConnectionProperties};

use crate::secret::Secret;
use crate::tls::{TlsError, TlsSettings};

/// amqp091-go's default dial timeout, which KEDA uses.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a passive declare may take before the call fails (and the connection is
/// re-opened on the next call).
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);
/// Idle channels kept open per connection.
const MAX_IDLE_CHANNELS: usize = 8;
/// The `connection_name` client property the broker shows for our connections. KEDA names
/// them `keda-<namespace>-<name>`; ours are shared by every object on the broker.
pub const CONNECTION_NAME: &str = "keda-rs";

/// What an AMQP connection is shared by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AmqpKey {
    /// `host` as given (credentials included).
    pub host: Secret,
    /// `vhostName` override.
    pub vhost: Option<String>,
    /// `username`/`password` overriding the URL's.
    pub credentials: Option<(String, Secret)>,
    /// TLS settings for `amqps://`.
    pub tls: TlsSettings,
}

impl crate::remote::Classify for AmqpError {
    fn classify(&self) -> crate::remote::Failure {
        use crate::remote::{Failure, Kind};
        match self {
            Self::Lapin(e) => e.classify(),
            Self::ExternalRefused(e) => {
                let inner = e.classify();
                Failure::new(
                    Kind::Local(format!(
                        "the broker refused the SASL EXTERNAL login with the client certificate (parameters \"cert\" and \"key\"): {inner}; RabbitMQ must have the rabbitmq_auth_mechanism_ssl plugin enabled, EXTERNAL in auth_mechanisms, and a user named as the certificate's subject (ssl_cert_login_from); or give \"username\" and \"password\" to log in with PLAIN"
                    )),
                    inner.raw().map(str::to_string),
                )
            }
            // keda-rs' own words about the trigger's URI, TLS material, timeout.
            other => Failure::local(other.to_string()),
        }
    }
}

/// Why a connection could not be opened or a queue could not be read. Messages may contain
/// what the broker or the socket said: [`crate::remote::Classify`] shows only their kind.
#[derive(Debug, thiserror::Error)]
pub enum AmqpError {
    /// `host` is not an AMQP URI.
    #[error("parameter \"host\" is not a valid AMQP URI: {0}")]
    Uri(String),
    /// Bad TLS material.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The connection or the query failed.
    #[error(transparent)]
    Lapin(#[from] lapin::Error),
    /// The broker refused the SASL EXTERNAL login with the client certificate.
    #[error(
        "the broker refused the SASL EXTERNAL login with the client certificate (parameters \"cert\" and \"key\"): {0}; RabbitMQ must have the rabbitmq_auth_mechanism_ssl plugin enabled, EXTERNAL in auth_mechanisms, and a user named as the certificate's subject (ssl_cert_login_from); or give \"username\" and \"password\" to log in with PLAIN"
    )]
    ExternalRefused(lapin::Error),
    /// The broker did not answer in time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// The SASL mechanism of a connection:
/// - `auth_mechanism` in the query of `host` when given (`?auth_mechanism=external`): KEDA's
///   rule, which amqp091-go implements (`plain`, `amqplain`, `external`, any case);
/// - else EXTERNAL for `amqps://` with a client certificate (`tls: enable`, `cert`, `key`) and no
///   credentials anywhere (no user in `host`, no `username`/`password`): the broker takes the
///   user from the certificate. KEDA logs in with PLAIN as `guest`/`guest` there (amqp091-go's
///   default), which RabbitMQ refuses on any but a loopback connection;
/// - else PLAIN.
pub fn sasl_mechanism(key: &AmqpKey, uri: &AMQPUri) -> SASLMechanism {
    if let Some(mechanism) = uri.query.auth_mechanism {
        return mechanism;
    }
    let url_has_user = url::Url::parse(key.host.expose()).is_ok_and(|u| !u.username().is_empty());
    if uri.scheme == AMQPScheme::AMQPS
        && key.tls.client.is_some()
        && key.credentials.is_none()
        && !url_has_user
    {
        SASLMechanism::External
    } else {
        SASLMechanism::Plain
    }
}

/// The broker closed the connection with ACCESS_REFUSED (403): a refused login.
fn access_refused(error: &lapin::Error) -> bool {
    matches!(error.kind(), lapin::ErrorKind::ProtocolError(e) if e.get_id() == 403)
}

/// A shared AMQP connection.
pub struct AmqpClient {
    uri: AMQPUri,
    tls: Option<Arc<rustls::ClientConfig>>,
    connection: tokio::sync::Mutex<Option<Arc<Connection>>>,
    idle: Mutex<Vec<Channel>>,
}

impl AmqpClient {
    /// Prepares the client of `key` and opens its connection.
    ///
    /// # Errors
    /// The URI or TLS material is invalid, or connecting fails.
    pub async fn connect(key: &AmqpKey) -> Result<Self, AmqpError> {
        let mut uri: AMQPUri = key.host.expose().parse().map_err(AmqpError::Uri)?;
        if let Some(vhost) = &key.vhost {
            uri.vhost.clone_from(vhost);
        } else if uri.vhost.is_empty() {
            // `amqp://host:5672/`: amqp091-go (KEDA) reads a bare `/` as the default vhost,
            // lapin as the empty vhost, which cannot exist. Follow KEDA.
            uri.vhost = "/".to_string();
        }
        // lapin's URI parser reads the host as a domain name only and takes `localhost` for an
        // IPv6 address (`amqp://[fd00::5]` would connect to localhost): take the host as
        // written, without the brackets.
        if let Some(host) = url::Url::parse(key.host.expose())
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
        {
            uri.authority.host = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
        }
        if let Some((user, password)) = &key.credentials {
            uri.authority.userinfo.username.clone_from(user);
            uri.authority.userinfo.password = password.expose().to_string();
        }
        uri.query.auth_mechanism = Some(sasl_mechanism(key, &uri));
        let tls = match uri.scheme {
            AMQPScheme::AMQPS => Some(Arc::new(key.tls.client_config()?)),
            AMQPScheme::AMQP => None,
        };
        let client = Self {
            uri,
            tls,
            connection: tokio::sync::Mutex::new(None),
            idle: Mutex::new(Vec::new()),
        };
        client.connection().await?;
        Ok(client)
    }

    /// The open connection, re-opened if it broke.
    async fn connection(&self) -> Result<Arc<Connection>, AmqpError> {
        // Held across the connect so concurrent callers wait for one connect.
        let mut guard = self.connection.lock().await;
        if let Some(connection) = guard.as_ref()
            && connection.status().connected()
        {
            return Ok(Arc::clone(connection));
        }
        // Channels of a broken connection are useless.
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        *guard = None;
        let connection = tokio::time::timeout(CONNECT_TIMEOUT, self.open())
            .await
            .map_err(|_| AmqpError::Timeout(CONNECT_TIMEOUT))??;
        let connection = Arc::new(connection);
        *guard = Some(Arc::clone(&connection));
        Ok(connection)
    }

    /// The SASL mechanism the connection logs in with.
    pub fn mechanism(&self) -> SASLMechanism {
        self.uri.query.auth_mechanism.unwrap_or_default()
    }

    async fn open(&self) -> Result<Connection, AmqpError> {
        let mechanism = self.mechanism();
        self.dial().await.map_err(|e| match e {
            AmqpError::Lapin(e) if mechanism == SASLMechanism::External && access_refused(&e) => {
                AmqpError::ExternalRefused(e)
            }
            e => e,
        })
    }

    async fn dial(&self) -> Result<Connection, AmqpError> {
        let properties =
            ConnectionProperties::default().with_connection_name(CONNECTION_NAME.into());
        let runtime = lapin::runtime::default_runtime()?;
        let tls = self.tls.clone();
        let connection = Connection::connector(
            self.uri.clone(),
            runtime,
            async move |uri: AMQPUri, runtime| {
                let host = uri.authority.host.clone();
                let addresses: Vec<std::net::SocketAddr> =
                    tokio::net::lookup_host((host.as_str(), uri.authority.port))
                        .await
                        .map_err(lapin::Error::from)?
                        .collect();
                let stream = AsyncTcpStream::connect(&runtime, addresses)
                    .await
                    .map_err(lapin::Error::from)?;
                match &tls {
                    Some(config) => stream
                        .into_rustls(&RustlsConnector::from(Arc::clone(config)), &host)
                        .await
                        .map_err(lapin::Error::from),
                    None => Ok(stream),
                }
            },
            properties,
        )
        .await?;
        Ok(connection)
    }

    async fn channel(&self) -> Result<Channel, AmqpError> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        if let Some(channel) = idle
            && channel.status().connected()
        {
            return Ok(channel);
        }
        let connection = self.connection().await?;
        Ok(connection.create_channel().await?)
    }

    fn give_back(&self, channel: Channel) {
        if !channel.status().connected() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < MAX_IDLE_CHANNELS {
            idle.push(channel);
        }
    }

    /// The number of ready messages of `queue` (a passive declare: the queue must exist).
    ///
    /// # Errors
    /// The connection cannot be (re-)opened, the queue does not exist, or the broker does
    /// not answer within 10 s.
    pub async fn ready_messages(&self, queue: &str) -> Result<u32, AmqpError> {
        let channel = self.channel().await?;
        let declare = channel.queue_declare(
            queue.into(),
            QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        );
        let result = match tokio::time::timeout(QUERY_TIMEOUT, declare).await {
            Ok(result) => result.map_err(AmqpError::from),
            Err(_) => {
                // The connection may be half-dead: open a new one next time.
                *self.connection.lock().await = None;
                return Err(AmqpError::Timeout(QUERY_TIMEOUT));
            }
        };
        let queue = result?;
        self.give_back(channel);
        Ok(queue.message_count())
    }

    /// Whether the connection is open now (for tests and diagnostics).
    pub async fn is_connected(&self) -> bool {
        self.connection
            .lock()
            .await
            .as_ref()
            .is_some_and(|c| c.status().connected())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(host: &str, credentials: bool, client_cert: bool) -> AmqpKey {
        AmqpKey {
            host: Secret::new(host),
            vhost: None,
            credentials: credentials.then(|| ("u".to_string(), Secret::new("p"))),
            tls: TlsSettings {
                client: client_cert.then(|| (Secret::new("C"), Secret::new("K"))),
                ..TlsSettings::default()
            },
        }
    }

    #[test]
    fn the_mechanism_is_the_url_s_else_external_for_a_certificate_without_credentials() {
        use SASLMechanism::{AMQPlain, External, Plain};
        // (host, username/password params, client certificate, mechanism)
        let rows = [
            // KEDA's rule (amqp091-go): the URL's auth_mechanism, any case.
            (
                "amqps://h:5671/?auth_mechanism=external",
                false,
                true,
                External,
            ),
            (
                "amqps://h:5671/?auth_mechanism=EXTERNAL",
                true,
                true,
                External,
            ),
            (
                "amqp://u:p@h/?auth_mechanism=amqplain",
                false,
                false,
                AMQPlain,
            ),
            ("amqps://h/?auth_mechanism=plain", false, true, Plain),
            // A certificate and no credentials anywhere, over AMQPS: EXTERNAL.
            ("amqps://h:5671/vh", false, true, External),
            // Credentials in the URL or as parameters, no certificate, or no TLS: PLAIN.
            ("amqps://user@h:5671/vh", false, true, Plain),
            ("amqps://user:pw@h:5671/vh", false, true, Plain),
            ("amqps://h:5671/vh", true, true, Plain),
            ("amqps://h:5671/vh", false, false, Plain),
            ("amqp://h:5672/vh", false, true, Plain),
        ];
        for (host, credentials, cert, expected) in rows {
            let key = key(host, credentials, cert);
            let uri: AMQPUri = host.parse().unwrap();
            assert_eq!(
                sasl_mechanism(&key, &uri),
                expected,
                "{host} {credentials} {cert}"
            );
        }
    }
}
