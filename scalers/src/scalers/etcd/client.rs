//! A client for the part of etcd's v3 gRPC API the scaler uses (`scalers/proto/etcd.proto`):
//! reading a key (`KV.Range`), watching it (`Watch.Watch`) and logging in
//! (`Auth.Authenticate`).
//!
//! One client per (endpoints, TLS settings, credentials), shared by every trigger that names
//! them: one lazily connected HTTP/2 channel per endpoint ([`ExternalChannel`], the channel of
//! the `external` scaler, with our rustls TLS). Calls go to the endpoint that answered last;
//! when it cannot be reached the next one is tried, as etcd's Go client fails over between
//! its endpoints. With credentials, the token from `Authenticate` is sent in the `token`
//! metadata of every call and fetched again when etcd says it is no longer valid (etcd's simple
//! tokens expire after 5 idle minutes by default).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tonic::Code;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;

use super::proto::{
    AuthenticateRequest, KeyValue, RangeRequest, WatchCreateRequest, WatchRequest, WatchResponse,
    auth_client::AuthClient, kv_client::KvClient, watch_client::WatchClient,
    watch_request::RequestUnion,
};
use crate::scalers::external::GrpcError;
use crate::scalers::external::channel::{ChannelKey, ExternalChannel, ScalerAddress};
use crate::secret::Secret;
use crate::tls::TlsSettings;

/// etcd's Go client's `DialTimeout` in KEDA, and KEDA's timeout of one read.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// What a client is shared by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EtcdKey {
    /// The endpoints, in the order written.
    pub endpoints: Vec<ScalerAddress>,
    /// TLS, if enabled.
    pub tls: Option<TlsSettings>,
    /// User name and password, if given.
    pub credentials: Option<(String, Secret)>,
}

impl crate::remote::Classify for EtcdError {
    fn classify(&self) -> crate::remote::Failure {
        // The Display shows the endpoint (the trigger's) and the gRPC code; the status
        // message is etcd's text, debug level only.
        let raw = match self {
            Self::Call { source, .. } | Self::Authenticate { source, .. } => {
                Some(source.status.message().to_string())
            }
            _ => None,
        };
        crate::remote::Failure::new(crate::remote::Kind::Local(self.to_string()), raw)
    }
}

/// Why a call failed. Never contains the password or the token.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// etcd (or the transport) answered an error status.
    #[error("{endpoint}: {source}")]
    Call {
        /// The endpoint asked.
        endpoint: String,
        /// The status.
        #[source]
        source: GrpcError,
    },
    /// No answer within [`CALL_TIMEOUT`].
    #[error("{endpoint}: no answer within {} ms", CALL_TIMEOUT.as_millis())]
    Timeout {
        /// The endpoint asked.
        endpoint: String,
    },
    /// Logging in failed: wrong user name or password, or authentication is not enabled.
    #[error(
        "{endpoint}: logging in with the parameters \"username\" and \"password\" failed: {source}"
    )]
    Authenticate {
        /// The endpoint asked.
        endpoint: String,
        /// The status.
        #[source]
        source: GrpcError,
    },
    /// The token etcd returned cannot be sent as gRPC metadata.
    #[error("etcd returned an authentication token that is not valid gRPC metadata")]
    BadToken,
}

/// The shared client of one set of endpoints.
#[derive(Debug)]
pub struct EtcdClient {
    endpoints: Vec<(ScalerAddress, ExternalChannel)>,
    current: AtomicUsize,
    credentials: Option<(String, Secret)>,
    token: tokio::sync::Mutex<Option<MetadataValue<tonic::metadata::Ascii>>>,
}

/// Whether `status` says the endpoint could not be reached (try another one).
fn unreachable(status: &tonic::Status) -> bool {
    matches!(status.code(), Code::Unavailable | Code::DeadlineExceeded)
}

/// Whether `status` says the token is missing, expired or revoked (log in again).
fn token_rejected(status: &tonic::Status) -> bool {
    status.code() == Code::Unauthenticated
        || status.message().contains("invalid auth token")
        || status.message().contains("user name is empty")
}

impl EtcdClient {
    /// A client for `key`, connecting lazily.
    ///
    /// # Errors
    /// The TLS settings are unusable (the caller checks them first, naming the parameters).
    pub fn new(key: &EtcdKey) -> Result<Self, crate::scalers::external::channel::ChannelError> {
        let endpoints = key
            .endpoints
            .iter()
            .map(|address| {
                let channel_key = ChannelKey {
                    address: address.clone(),
                    tls: key.tls.clone(),
                };
                ExternalChannel::new(&channel_key, CALL_TIMEOUT).map(|c| (address.clone(), c))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            endpoints,
            current: AtomicUsize::new(0),
            credentials: key.credentials.clone(),
            token: tokio::sync::Mutex::new(None),
        })
    }

    /// The endpoints, starting with the current one.
    fn rotation(&self) -> impl Iterator<Item = (usize, &ScalerAddress, Channel)> + '_ {
        let n = self.endpoints.len().max(1);
        let start = self.current.load(Ordering::Relaxed) % n;
        (0..self.endpoints.len()).filter_map(move |i| {
            let index = (start + i) % n;
            self.endpoints
                .get(index)
                .map(|(address, channel)| (index, address, channel.channel()))
        })
    }

    /// Makes the endpoint after `index` the current one, so the next call (or watch) goes
    /// elsewhere.
    pub fn skip(&self, index: usize) {
        let n = self.endpoints.len().max(1);
        let _ = self.current.compare_exchange(
            index % n,
            (index + 1) % n,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// The token to send, logging in first if there is none (`None` without credentials).
    async fn token(
        &self,
        endpoint: &ScalerAddress,
        channel: Channel,
        renew: bool,
    ) -> Result<Option<MetadataValue<tonic::metadata::Ascii>>, EtcdError> {
        let Some((name, password)) = &self.credentials else {
            return Ok(None);
        };
        let mut token = self.token.lock().await;
        if renew {
            *token = None;
        }
        if let Some(current) = token.as_ref() {
            return Ok(Some(current.clone()));
        }
        let request = AuthenticateRequest {
            name: name.clone(),
            password: password.expose().to_string(),
        };
        let answer =
            tokio::time::timeout(CALL_TIMEOUT, AuthClient::new(channel).authenticate(request))
                .await
                .map_err(|_| EtcdError::Timeout {
                    endpoint: endpoint.to_string(),
                })?
                .map_err(|status| EtcdError::Authenticate {
                    endpoint: endpoint.to_string(),
                    source: GrpcError { status },
                })?;
        let value = MetadataValue::try_from(answer.into_inner().token.as_str())
            .map_err(|_| EtcdError::BadToken)?;
        *token = Some(value.clone());
        Ok(Some(value))
    }

    /// A request carrying the token (when logged in) and, for watches, `hasleader` (etcd's
    /// `WithRequireLeader`: a member that lost its leader ends the watch instead of keeping
    /// a stale one open).
    fn request<T>(
        message: T,
        token: Option<&MetadataValue<tonic::metadata::Ascii>>,
        require_leader: bool,
    ) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        if let Some(token) = token {
            request.metadata_mut().insert("token", token.clone());
        }
        if require_leader {
            request
                .metadata_mut()
                .insert("hasleader", MetadataValue::from_static("true"));
        }
        request
    }

    /// The value of `key`, or `None` when it does not exist.
    ///
    /// # Errors
    /// No endpoint answers, or etcd refuses (permissions, login).
    pub async fn get(&self, key: &str) -> Result<Option<KeyValue>, EtcdError> {
        let mut last = None;
        for (index, endpoint, channel) in self.rotation() {
            match self.get_from(endpoint, channel, key).await {
                Ok(kv) => {
                    self.current.store(index, Ordering::Relaxed);
                    return Ok(kv);
                }
                Err(e) if reachability_error(&e) => {
                    self.skip(index);
                    last = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or(EtcdError::Timeout {
            endpoint: String::new(),
        }))
    }

    async fn get_from(
        &self,
        endpoint: &ScalerAddress,
        channel: Channel,
        key: &str,
    ) -> Result<Option<KeyValue>, EtcdError> {
        let mut renew = false;
        loop {
            let token = self.token(endpoint, channel.clone(), renew).await?;
            let request = Self::request(
                RangeRequest {
                    key: key.as_bytes().to_vec(),
                    range_end: Vec::new(),
                    limit: 1,
                },
                token.as_ref(),
                false,
            );
            let answer =
                tokio::time::timeout(CALL_TIMEOUT, KvClient::new(channel.clone()).range(request))
                    .await
                    .map_err(|_| EtcdError::Timeout {
                        endpoint: endpoint.to_string(),
                    })?;
            match answer {
                Ok(answer) => return Ok(answer.into_inner().kvs.into_iter().next()),
                Err(status) if !renew && token.is_some() && token_rejected(&status) => {
                    renew = true;
                }
                Err(status) => {
                    return Err(EtcdError::Call {
                        endpoint: endpoint.to_string(),
                        source: GrpcError { status },
                    });
                }
            }
        }
    }

    /// Opens a watch of `key` with progress notifications on the current endpoint. Returns the
    /// endpoint's index (for [`EtcdClient::skip`]) and the stream of answers.
    ///
    /// # Errors
    /// The endpoint cannot be reached or refuses the watch.
    pub async fn watch(
        &self,
        key: &str,
    ) -> Result<(usize, String, tonic::Streaming<WatchResponse>), (usize, EtcdError)> {
        let Some((index, endpoint, channel)) = self.rotation().next() else {
            return Err((
                0,
                EtcdError::Timeout {
                    endpoint: String::new(),
                },
            ));
        };
        let token = self
            .token(endpoint, channel.clone(), false)
            .await
            .map_err(|e| (index, e))?;
        let create = WatchRequest {
            request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
                key: key.as_bytes().to_vec(),
                range_end: Vec::new(),
                start_revision: 0,
                progress_notify: true,
                prev_kv: false,
            })),
        };
        // The request stream stays open for as long as the watch: etcd ends a watch whose
        // client has closed its side.
        let requests =
            futures::StreamExt::chain(futures::stream::iter([create]), futures::stream::pending());
        let opened = tokio::time::timeout(
            CALL_TIMEOUT,
            WatchClient::new(channel).watch(Self::request(requests, token.as_ref(), true)),
        )
        .await;
        match opened {
            Ok(Ok(stream)) => Ok((index, endpoint.to_string(), stream.into_inner())),
            Ok(Err(status)) => {
                if token.is_some() && token_rejected(&status) {
                    // Log in again before the next attempt.
                    *self.token.lock().await = None;
                }
                Err((
                    index,
                    EtcdError::Call {
                        endpoint: endpoint.to_string(),
                        source: GrpcError { status },
                    },
                ))
            }
            Err(_) => Err((
                index,
                EtcdError::Timeout {
                    endpoint: endpoint.to_string(),
                },
            )),
        }
    }

    /// Forgets the token, so the next call logs in again.
    pub async fn forget_token(&self) {
        *self.token.lock().await = None;
    }
}

fn reachability_error(e: &EtcdError) -> bool {
    match e {
        EtcdError::Timeout { .. } => true,
        EtcdError::Call { source, .. } | EtcdError::Authenticate { source, .. } => {
            unreachable(&source.status)
        }
        EtcdError::BadToken => false,
    }
}
