//! The tests' fake PredictKube ML engine: a gRPC server on loopback implementing the engine's
//! `services.MlEngineService/GetPredictMetric` (the service trait generated into
//! `keda_scalers`), served with hyper over plain TCP (h2c).
//!
//! It checks a call as the real engine does before it forecasts (the facts of
//! github.com/dysnix/predictkube-libs and predictkube-proto, which KEDA's scaler uses):
//! - the API key arrives as the gRPC metadata `x-auth-api-key` (predictkube-libs'
//!   `grpc.APIKey`, set by `InjectPublicClientMetadataInterceptor`) and is one the engine issued:
//!   otherwise `UNAUTHENTICATED`;
//! - each key has a quota of calls: beyond it, `RESOURCE_EXHAUSTED`;
//! - every observation carries a timestamp (`commonproto.Item.timestamp`): otherwise
//!   `INVALID_ARGUMENT`.
//!
//! It answers `ResGetPredictMetric.result_metric` with the forecast the test set, and records
//! every request it accepted and the connections it saw. Its error messages carry a marker
//! (`engine-said`) the tests check never reaches keda-rs' messages.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use keda_scalers::scalers::predictkube::proto::ml_engine_service_server::{
    MlEngineService, MlEngineServiceServer,
};
use keda_scalers::scalers::predictkube::proto::{ReqGetPredictMetric, ResGetPredictMetric};
use tokio::net::TcpListener;
use tonic::{Request, Response, Status};

/// The metadata the API key travels in.
pub const API_KEY_HEADER: &str = "x-auth-api-key";

/// A JWT-shaped API key the fake engine accepts (KEDA's test key).
pub const GOOD_KEY: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJhdWQiOiJ0ZXN0IENyZWF0ZUNsaWVudCIsImV4cCI6MTY0NjkxNzI3Nywic3ViIjoiODM4NjY5ODAtM2UzNS0xMWVjLTlmMjQtYWNkZTQ4MDAxMTIyIn0.5QEuO6_ysdk2abGvk3Xp7Q25M4H4pIFXeqP2E7n9rKI";

/// A JWT-shaped key the engine never issued.
pub const UNKNOWN_KEY: &str = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJub2JvZHkifQ.c2lnbmF0dXJl";

/// The marker in every error message of the fake.
pub const ENGINE_SAID: &str = "engine-said";

/// What the engine knows and saw.
#[derive(Default)]
pub struct State {
    /// Issued keys and how many calls each may still make.
    pub quota: Mutex<HashMap<String, usize>>,
    /// The forecast answered.
    pub forecast: AtomicI64,
    /// Every accepted request, with the key it came with.
    pub requests: Mutex<Vec<(String, ReqGetPredictMetric)>>,
    /// Calls refused, by code.
    pub refused: Mutex<Vec<tonic::Code>>,
    /// TCP connections accepted, ever.
    pub accepted: AtomicUsize,
}

#[derive(Clone)]
struct Handler(Arc<State>);

#[tonic::async_trait]
impl MlEngineService for Handler {
    async fn get_predict_metric(
        &self,
        request: Request<ReqGetPredictMetric>,
    ) -> Result<Response<ResGetPredictMetric>, Status> {
        let result = self.check(&request);
        if let Err(status) = &result {
            self.0.refused.lock().expect("refused").push(status.code());
        }
        let key = result?;
        self.0
            .requests
            .lock()
            .expect("requests")
            .push((key, request.into_inner()));
        Ok(Response::new(ResGetPredictMetric {
            result_metric: self.0.forecast.load(Ordering::SeqCst),
        }))
    }
}

impl Handler {
    fn check(&self, request: &Request<ReqGetPredictMetric>) -> Result<String, Status> {
        let key = request
            .metadata()
            .get(API_KEY_HEADER)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| Status::unauthenticated(format!("{ENGINE_SAID}: no api key")))?
            .to_string();
        {
            let mut quota = self.0.quota.lock().expect("quota");
            let Some(left) = quota.get_mut(&key) else {
                return Err(Status::unauthenticated(format!(
                    "{ENGINE_SAID}: unknown api key {key}"
                )));
            };
            if *left == 0 {
                return Err(Status::resource_exhausted(format!(
                    "{ENGINE_SAID}: quota of {key} used up"
                )));
            }
            *left -= 1;
        }
        if request
            .get_ref()
            .observations
            .iter()
            .any(|o| o.timestamp.is_none())
        {
            return Err(Status::invalid_argument(format!(
                "{ENGINE_SAID}: an observation without a timestamp"
            )));
        }
        Ok(key)
    }
}

/// A running fake engine on a loopback port. Stopped when dropped.
pub struct FakeEngine {
    /// Where it listens.
    pub addr: SocketAddr,
    /// What it knows and saw.
    pub state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeEngine {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeEngine {
    /// A plaintext (h2c) engine that issued [`GOOD_KEY`] with `quota` calls.
    pub async fn start(quota: usize) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(State::default());
        state
            .quota
            .lock()
            .expect("quota")
            .insert(GOOD_KEY.to_string(), quota);
        let service = MlEngineServiceServer::new(Handler(Arc::clone(&state)));
        let accepted = Arc::clone(&state);
        let task = tokio::spawn(async move {
            // Aborting this task drops the set, which aborts every connection.
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                accepted.accepted.fetch_add(1, Ordering::SeqCst);
                let service = TowerToHyperService::new(service.clone());
                connections.spawn(async move {
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
                while connections.try_join_next().is_some() {}
            }
        });
        Self { addr, state, task }
    }

    /// `http://127.0.0.1:<port>`: where the vendor endpoints send `api.predictkube.com`.
    pub fn url(&self) -> url::Url {
        url::Url::parse(&format!("http://{}", self.addr)).expect("url")
    }

    /// The process's vendor endpoints with the engine's host sent here.
    pub fn endpoints(&self) -> keda_scalers::http_client::VendorEndpoints {
        keda_scalers::http_client::VendorEndpoints::default().with(
            keda_scalers::scalers::predictkube::engine::ENGINE_HOST,
            self.url(),
        )
    }

    /// Sets the forecast answered.
    pub fn set_forecast(&self, value: i64) {
        self.state.forecast.store(value, Ordering::SeqCst);
    }

    /// The accepted requests so far.
    pub fn requests(&self) -> Vec<(String, ReqGetPredictMetric)> {
        self.state.requests.lock().expect("requests").clone()
    }

    /// The codes of the refused calls so far.
    pub fn refused(&self) -> Vec<tonic::Code> {
        self.state.refused.lock().expect("refused").clone()
    }

    /// TCP connections accepted, ever.
    pub fn accepted(&self) -> usize {
        self.state.accepted.load(Ordering::SeqCst)
    }
}
