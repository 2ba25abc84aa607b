//! One shape for every scaler that reads through a pooled client.
//!
//! A trigger type whose reads go through a client shared by all triggers with the same server
//! and credentials (an HTTP API, a SQL server, a cloud service) is written as a [`PooledSource`]: its
//! parsed configuration, the key of the client it leases, how to connect, its metric specs and
//! one read. [`Pooled`] is the [`Scaler`] around any source: it parses, leases the client at
//! build time, reads on every poll and releases the lease on `close`. A connection parameter
//! that KEDA only trips over when it fetches (a server address that is not a URL, say) leaves
//! the trigger built: [`PooledSource::client_key`] returns the error and every read fails with it,
//! naming the parameter, while the object's other triggers keep scaling it.
//!
//! Sources that speak HTTP (JSON, CSV, GraphQL over HTTP) implement the narrower [`HttpApi`]
//! instead: the parsed configuration, the request of a read and the reading of its answer. The
//! shared [`HttpClient`] does the rest (authentication, TLS, one keep-alive pool per server,
//! bounded bodies, the request metrics of KEDA's HTTP round tripper, remote text kept out of
//! messages). Every [`HttpApi`] is a [`PooledSource`].
//!
//! Registering a type is one line with [`declare`]:
//!
//! ```ignore
//! registry.register("prometheus", pooled::declare::<PrometheusConfig>(prometheus::PARAMS));
//! ```

use std::borrow::Cow;
use std::hash::Hash;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use http::StatusCode;
use http::header::HeaderMap;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::context::{Clock, ScalerContext};
use crate::error::{MetadataError, ScalerError, TriggerId};
use crate::http_client::{self, HttpClient, HttpClientKey, HttpGetError};
use crate::metadata::Param;
use crate::pool::{Held, Lease};
use crate::registry::{Declared, ScalerFactory};
use crate::remote::{Classify, Failure};
use crate::scaler::{BuiltScaler, MetricsAndActivity, Scaler};

/// What a read knows beyond its source's configuration: which trigger it is (for errors) and
/// the time.
#[derive(Clone, Copy)]
pub struct ReadCtx<'a> {
    /// The trigger read, named in every error.
    pub trigger: &'a TriggerId,
    /// The scaler's clock (tests move it).
    pub clock: &'a Clock,
}

impl ReadCtx<'_> {
    /// The time now, by the scaler's clock.
    pub fn now(&self) -> jiff::Timestamp {
        self.clock.now()
    }

    /// A read that got an answer it cannot use: `message` says why in our words (never the
    /// remote's text).
    pub fn unexpected(&self, message: impl Into<String>) -> ScalerError {
        ScalerError::Unexpected {
            trigger: self.trigger.clone(),
            message: message.into(),
        }
    }
}

/// A trigger type read through a pooled client: its parsed configuration is `Self`.
#[async_trait]
pub trait PooledSource: Send + Sync + Sized + 'static {
    /// See [`Scaler::adaptive_polling`]. Default: `false`.
    const ADAPTIVE_POLLING: bool = false;

    /// What triggers share a client by: server, credentials, TLS settings, timeout.
    type Key: Eq + Hash + Clone + Send + Sync + 'static;
    /// The shared client.
    type Client: Send + Sync + 'static;

    /// Parses the trigger's metadata (KEDA's parameter names, lookup order and defaults).
    /// Never connects.
    ///
    /// # Errors
    /// What KEDA refuses when it parses: a missing required parameter, a malformed number, an
    /// incomplete authentication block. Parameters KEDA only trips over when it fetches are no
    /// error here (see [`PooledSource::client_key`]).
    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError>;

    /// Takes what the reads need from the context besides the client (the operator's shared
    /// EndpointSlice view, the operator's own credentials, a name the source resolves once
    /// when the trigger is built), after [`PooledSource::parse`] and before the lease. The
    /// parse-only check does not run it. Nothing by default.
    ///
    /// # Errors
    /// What the reads need is not in the context, or the source refuses the build (named by
    /// parameter): the trigger is not built.
    async fn attach(&mut self, _ctx: &ScalerContext) -> Result<(), ScalerError> {
        Ok(())
    }

    /// The key of the client to lease, or why the connection parameters cannot be used: then
    /// the trigger builds without a client and every read fails with this error.
    ///
    /// # Errors
    /// See above.
    fn client_key(&self) -> Result<Self::Key, MetadataError>;

    /// A lease on the client of `key` from the shared pools (`ctx.clients`), building it if
    /// no trigger holds one. Should not block on the network for long.
    ///
    /// # Errors
    /// The client cannot be built (bad TLS material, named by parameter).
    async fn connect(
        ctx: &ScalerContext,
        key: Self::Key,
    ) -> Result<Lease<Self::Key, Self::Client>, ScalerError>;

    /// The HPA metric specs of the trigger. Pure.
    fn metric_specs(&self) -> Vec<MetricSpec>;

    /// Reads `metric_name` through `client`. Cancellation-safe; bounded in time and size.
    ///
    /// # Errors
    /// The source cannot be reached or answers something unusable. Messages name the trigger,
    /// the operation and the server, never credentials or the remote's own text.
    async fn read(
        &self,
        client: &Self::Client,
        read: ReadCtx<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError>;
}

/// The scaler of any [`PooledSource`]: the configuration, the trigger, the clock and the lease.
pub struct Pooled<S: PooledSource> {
    source: S,
    trigger: TriggerId,
    clock: Clock,
    /// The lease, or why the connection parameters cannot be used.
    client: Result<Held<S::Key, S::Client>, MetadataError>,
}

impl<S: PooledSource> Pooled<S> {
    /// Parses the trigger and leases its client (building it if it is the first trigger on
    /// that key). Does not connect to the source itself.
    ///
    /// # Errors
    /// See [`PooledSource::parse`] and [`PooledSource::connect`].
    pub async fn build(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let mut source = S::parse(ctx)?;
        source.attach(ctx).await?;
        let client = match source.client_key() {
            Ok(key) => Ok(Held::new(S::connect(ctx, key).await?)),
            Err(unusable) => Err(unusable),
        };
        Ok(Self {
            source,
            trigger: ctx.trigger_id(),
            clock: ctx.clock.clone(),
            client,
        })
    }

    /// The parsed trigger.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// The trigger.
    pub fn trigger(&self) -> &TriggerId {
        &self.trigger
    }

    /// What a read of this scaler knows.
    pub fn read_ctx(&self) -> ReadCtx<'_> {
        ReadCtx {
            trigger: &self.trigger,
            clock: &self.clock,
        }
    }

    /// The leased client.
    ///
    /// # Errors
    /// The connection parameters cannot be used (the error names them), or the scaler is
    /// closed.
    pub fn client(&self) -> Result<Arc<S::Client>, ScalerError> {
        match &self.client {
            Err(unusable) => Err(ScalerError::Metadata(unusable.clone())),
            Ok(held) => held.client().ok_or_else(|| ScalerError::Closed {
                trigger: self.trigger.clone(),
            }),
        }
    }
}

#[async_trait]
impl<S: PooledSource> Scaler for Pooled<S> {
    fn metric_specs(&self) -> Vec<MetricSpec> {
        self.source.metric_specs()
    }

    async fn metrics_and_activity(
        &self,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let client = self.client()?;
        self.source
            .read(&client, self.read_ctx(), metric_name)
            .await
    }

    async fn close(&self) {
        if let Ok(held) = &self.client {
            held.release();
        }
    }

    fn adaptive_polling(&self) -> bool {
        S::ADAPTIVE_POLLING
    }
}

/// The factory of source `S`.
///
/// # Errors
/// See [`Pooled::build`].
pub async fn build<S: PooledSource>(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    Ok(BuiltScaler::Pull(Box::new(Pooled::<S>::build(&ctx).await?)))
}

/// The parse-only check of source `S` (for the webhook, `explain` and the fuzzers).
///
/// # Errors
/// See [`PooledSource::parse`].
pub fn check<S: PooledSource>(ctx: &ScalerContext) -> Result<(), ScalerError> {
    S::parse(ctx).map(drop)
}

/// Source `S` as the registry takes it: its factory, its parameters and its check.
pub fn declare<S: PooledSource>(params: &'static [Param]) -> impl ScalerFactory + 'static {
    Declared::new(build::<S>, params).with_check(check::<S>)
}

/// A client that several trigger types lease by the same key (the Azure AD client of the
/// azure-* types, the GCP client of the gcp-* types): how to lease it.
#[async_trait]
pub trait SharedClient: Send + Sync + Sized + 'static {
    /// What triggers share the client by.
    type Key: Eq + Hash + Clone + Send + Sync + 'static;

    /// See [`PooledSource::connect`].
    ///
    /// # Errors
    /// See [`PooledSource::connect`].
    async fn lease(
        ctx: &ScalerContext,
        key: Self::Key,
    ) -> Result<Lease<Self::Key, Self>, ScalerError>;
}

/// A trigger type read through a [`SharedClient`] whose key its parsed configuration holds:
/// [`PooledSource`] without the leasing, which the client kind does. Register it as
/// `declare::<Keyed<MyConfig>>(PARAMS)`.
#[async_trait]
pub trait KeyedSource: Send + Sync + Sized + 'static {
    /// The client the reads go through.
    type Client: SharedClient;

    /// See [`PooledSource::parse`].
    ///
    /// # Errors
    /// See [`PooledSource::parse`].
    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError>;

    /// The key of the client to lease.
    fn key(&self) -> &<Self::Client as SharedClient>::Key;

    /// See [`PooledSource::metric_specs`].
    fn metric_specs(&self) -> Vec<MetricSpec>;

    /// See [`PooledSource::read`].
    ///
    /// # Errors
    /// See [`PooledSource::read`].
    async fn read(
        &self,
        client: &Self::Client,
        read: ReadCtx<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError>;
}

/// A [`KeyedSource`] as a [`PooledSource`].
pub struct Keyed<S>(pub S);

#[async_trait]
impl<S: KeyedSource> PooledSource for Keyed<S> {
    type Key = <S::Client as SharedClient>::Key;
    type Client = S::Client;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        S::parse(ctx).map(Keyed)
    }

    fn client_key(&self) -> Result<Self::Key, MetadataError> {
        Ok(self.0.key().clone())
    }

    async fn connect(
        ctx: &ScalerContext,
        key: Self::Key,
    ) -> Result<Lease<Self::Key, Self::Client>, ScalerError> {
        S::Client::lease(ctx, key).await
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        self.0.metric_specs()
    }

    async fn read(
        &self,
        client: &Self::Client,
        read: ReadCtx<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        self.0.read(client, read, metric_name).await
    }
}

/// One HTTP request of a read: `GET` without a body, `POST` with one.
#[derive(Clone, Debug)]
pub struct ApiRequest<'a> {
    /// The URL, query included (the client adds the authentication's query parameters).
    pub url: url::Url,
    /// Headers sent after the authentication's.
    pub headers: Cow<'a, HeaderMap>,
    /// The body of a `POST`.
    pub body: Option<Bytes>,
}

impl<'a> ApiRequest<'a> {
    /// `GET url`.
    pub fn get(url: url::Url, headers: &'a HeaderMap) -> Self {
        Self {
            url,
            headers: Cow::Borrowed(headers),
            body: None,
        }
    }

    /// `POST body` to `url`.
    pub fn post(url: url::Url, headers: Cow<'a, HeaderMap>, body: impl Into<Bytes>) -> Self {
        Self {
            url,
            headers,
            body: Some(body.into()),
        }
    }
}

/// A trigger type read over an HTTP API through the shared [`HttpClient`]: its parsed
/// configuration is `Self`. Writing one is: [`HttpApi::parse`] (KEDA's parameters),
/// [`HttpApi::client_key`] (server, authentication, timeout), [`HttpApi::request`] (what one
/// read sends), [`HttpApi::read`] (the answer to a value and activity), [`HttpApi::operation`]
/// (what a read does, for messages) and the metric specs. Override [`HttpApi::fetch`] for a
/// read of several requests (pages, failover across addresses); override
/// [`HttpApi::error_answer`] to name a vendor's error code (a fixed vocabulary) instead of the
/// bare status.
#[async_trait]
pub trait HttpApi: Send + Sync + Sized + 'static {
    /// See [`Scaler::adaptive_polling`]. Default: `false`.
    const ADAPTIVE_POLLING: bool = false;

    /// See [`PooledSource::parse`].
    ///
    /// # Errors
    /// See [`PooledSource::parse`].
    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError>;

    /// See [`PooledSource::attach`].
    ///
    /// # Errors
    /// See [`PooledSource::attach`].
    fn attach(&mut self, _ctx: &ScalerContext) -> Result<(), ScalerError> {
        Ok(())
    }

    /// The pooled client's key, or why the server parameters cannot be used (every read fails
    /// with it).
    ///
    /// # Errors
    /// See above.
    fn client_key(&self) -> Result<HttpClientKey, MetadataError>;

    /// See [`PooledSource::metric_specs`].
    fn metric_specs(&self) -> Vec<MetricSpec>;

    /// The request of a read at `now`.
    ///
    /// # Errors
    /// A parameter that can only be used when the request is made (named in the error).
    fn request(&self, now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError>;

    /// What `request` does, for messages: the query and the server
    /// ([`http_client::describe_url`]), never credentials.
    fn operation(&self, request: &ApiRequest<'_>) -> String;

    /// A non-2xx answer in the vendor's words, when the API has a fixed vocabulary of error
    /// codes (Prometheus' `errorType`); `None` reports the status alone.
    fn error_answer(&self, _status: StatusCode, _body: &[u8]) -> Option<Failure> {
        None
    }

    /// Reads a 2xx answer's body.
    ///
    /// # Errors
    /// The body is not the documented shape or holds no usable value: the message says why in
    /// our words.
    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String>;

    /// One read: by default one [`HttpApi::request`], its answer read by [`HttpApi::read`].
    ///
    /// # Errors
    /// See [`PooledSource::read`].
    async fn fetch(
        &self,
        call: &HttpCall<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let request = self
            .request(call.read.now())
            .map_err(ScalerError::Metadata)?;
        let body = call.send(self, request).await?;
        self.read(&body, metric_name)
            .map_err(|message| call.read.unexpected(message))
    }
}

/// A read in progress of an [`HttpApi`]: the leased client and the read's context.
pub struct HttpCall<'a> {
    /// The pooled client.
    pub client: &'a HttpClient,
    /// The trigger and the clock.
    pub read: ReadCtx<'a>,
}

impl HttpCall<'_> {
    /// Sends `request` and returns the body of a 2xx answer.
    ///
    /// # Errors
    /// [`ScalerError::Query`] naming `api`'s operation: unreachable, timed out, a non-2xx
    /// status (in the vendor's words where [`HttpApi::error_answer`] knows them), a body over
    /// the bound.
    pub async fn send<A: HttpApi>(
        &self,
        api: &A,
        request: ApiRequest<'_>,
    ) -> Result<Bytes, ScalerError> {
        let operation = api.operation(&request);
        let ApiRequest { url, headers, body } = request;
        let answer = match body {
            None => self.client.get(url, &headers).await,
            Some(body) => self.client.post(url, &headers, body).await,
        };
        answer.map_err(|e| {
            let failure = match &e {
                HttpGetError::Status { status, body, .. } => api
                    .error_answer(*status, body)
                    .unwrap_or_else(|| e.classify()),
                _ => e.classify(),
            };
            ScalerError::Query {
                trigger: self.read.trigger.clone(),
                operation,
                source: failure,
            }
        })
    }
}

#[async_trait]
impl<A: HttpApi> PooledSource for A {
    const ADAPTIVE_POLLING: bool = A::ADAPTIVE_POLLING;

    type Key = HttpClientKey;
    type Client = HttpClient;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        <A as HttpApi>::parse(ctx)
    }

    async fn attach(&mut self, ctx: &ScalerContext) -> Result<(), ScalerError> {
        <A as HttpApi>::attach(self, ctx)
    }

    fn client_key(&self) -> Result<HttpClientKey, MetadataError> {
        <A as HttpApi>::client_key(self)
    }

    async fn connect(
        ctx: &ScalerContext,
        key: HttpClientKey,
    ) -> Result<Lease<HttpClientKey, HttpClient>, ScalerError> {
        http_client::lease(ctx, key).await
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        <A as HttpApi>::metric_specs(self)
    }

    async fn read(
        &self,
        client: &HttpClient,
        read: ReadCtx<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        self.fetch(&HttpCall { client, read }, metric_name).await
    }
}
