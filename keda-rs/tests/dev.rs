//! `keda-rs dev` end to end: the built binary with `examples/redis-list.yaml` against the test
//! Redis; the replicas read through the kubeconfig it writes, with the real `kube` client;
//! the charts it writes at exit.

mod common;

use common::{Dev, redis_or_skip, replicas_seen};

#[tokio::test]
async fn redis_list_scales_zero_one_many_zero_and_charts_the_timeline() {
    let _serial = common::serial().await;
    let Some(mut redis) = redis_or_skip("redis_list_scales_zero_one_many_zero").await else {
        return;
    };
    let _: () = redis::cmd("DEL")
        .arg("jobs")
        .query_async(&mut redis)
        .await
        .expect("DEL");

    let dev = Dev::start(&["examples/redis-list.yaml"]).await;
    let client = dev.client().await;
    let seen = replicas_seen(client.clone(), "default", "redis-worker");

    // Reconciled and idle: 0 replicas (the Deployment asks for 0, the ScaledObject's min is 0).
    dev.wait_for_line("s0-redis-jobs value=0").await;
    seen.wait_for(0).await;

    // 20 jobs, 5 per replica: the operator activates 0 -> 1, the HPA takes 1 -> 4.
    let items: Vec<i32> = (1..=20).collect();
    let _: () = redis::cmd("RPUSH")
        .arg("jobs")
        .arg(&items)
        .query_async(&mut redis)
        .await
        .expect("RPUSH");
    seen.wait_for(4).await;

    // Empty again: after the 10 s cooldown the operator takes the target to 0.
    let _: () = redis::cmd("DEL")
        .arg("jobs")
        .query_async(&mut redis)
        .await
        .expect("DEL");
    seen.wait_for(0).await;
    let history = seen.history().await;
    assert!(
        common::in_order(&history, &[0, 1, 4, 0]),
        "replicas went {history:?}, not 0 -> 1 -> 4 -> 0"
    );

    let charts = dev.quit().await;
    let (svg, png) = charts.first().expect("one chart per ScaledObject").clone();
    assert!(
        svg.ends_with("default-redis-worker.svg"),
        "{}",
        svg.display()
    );
    let text = std::fs::read_to_string(&svg).expect("the SVG exists");
    let doc = roxmltree::Document::parse(&text).expect("the SVG is well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let polylines = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .count();
    assert!(polylines >= 2, "replicas and metric lines: {polylines}");
    let bytes = std::fs::read(&png).expect("the PNG exists");
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes))
        .read_info()
        .expect("the PNG decodes");
    let mut pixels = vec![0; reader.output_buffer_size().expect("a size")];
    reader
        .next_frame(&mut pixels)
        .expect("the PNG's image decodes");
    assert!(pixels.iter().any(|p| *p != 255), "the PNG is not blank");
}

/// One HTTP/1.1 GET through `addr` with `host`; the status line and the body.
async fn get(addr: std::net::SocketAddr, host: &str) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    tcp.write_all(request.as_bytes()).await.expect("send");
    let mut response = String::new();
    tcp.read_to_string(&mut response).await.expect("read");
    let status = response.lines().next().unwrap_or_default().to_string();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

#[tokio::test]
async fn an_http_request_scales_from_zero_through_the_activator() {
    let dev = Dev::start(&["examples/http-scale-from-zero.yaml"]).await;
    let client = dev.client().await;
    let activator = dev.activator().await;
    let seen = replicas_seen(client, "default", "hello");
    dev.wait_for_line("s0-http-hello").await;
    seen.wait_for(0).await;

    // The activator holds the request, the operator scales 0 -> 1, the stand-in pod answers.
    let (status, body) = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        get(activator, "hello.localhost"),
    )
    .await
    .expect("answered within the hold timeout");
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert_eq!(body, "hello from hello (dev pod 0)\n");
    seen.wait_for(1).await;
    assert_eq!(seen.history().await, vec![0, 1]);

    // A host no ScaledObject routes gets 404 from the activator.
    let (status, _) = get(activator, "other.localhost").await;
    assert!(status.starts_with("HTTP/1.1 404"), "{status}");
    let charts = dev.quit().await;
    assert_eq!(charts.len(), 1);
}
