//! Proxy and serve modes end to end on memkube (issue 28): the request stream of
//! `scenarios/serve_stream.rs` through proxy -> serve -> proxy -> zero -> back, every request
//! answered exactly once. The e2e suite runs the same scenario on a real API server.

#[path = "scenarios/serve_stream.rs"]
mod serve_stream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_stream_through_proxy_serve_proxy_zero_is_answered_exactly_once() {
    let kube = memkube::MemKube::new();
    let crd_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/crd");
    kube.load_crds_from_dir(crd_dir).expect("CRDs");
    kube.create_namespace("shop").expect("namespace");
    kube.create_namespace("keda").expect("namespace");
    serve_stream::flips_with_a_request_stream(kube.client(), "shop", "keda").await;
}
