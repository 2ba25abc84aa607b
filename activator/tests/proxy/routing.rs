//! Routing by host and path, and the forwarding headers on both paths.

use super::*;

#[tokio::test]
async fn requests_are_routed_by_host_and_path_and_unknown_hosts_get_404() {
    let a = activator().await;
    let (shop, _) = backend("shop").await;
    let (api, _) = backend("api").await;
    a.targets.apply(vec![
        config(
            "shop",
            &[("service", "shop"), ("hosts", "shop.example.com")],
        ),
        config(
            "api",
            &[
                ("service", "api"),
                ("hosts", "*.example.com"),
                ("pathPrefixes", "/api"),
            ],
        ),
    ]);
    a.targets
        .set_ready(&config("shop", &[("service", "s")]).key, vec![shop]);
    a.targets
        .set_ready(&config("api", &[("service", "s")]).key, vec![api]);
    let c = client();
    assert_eq!(
        get(&c, a.addr, "shop.example.com", "/").await,
        (200, "hello from shop".into())
    );
    assert_eq!(
        get(&c, a.addr, "x.example.com", "/api/v1").await,
        (200, "hello from api".into())
    );
    let (status, body) = get(&c, a.addr, "nothing.org", "/").await;
    assert_eq!(status, 404);
    assert!(
        body.contains("no route matched host \\\"nothing.org\\\""),
        "{body}"
    );
    assert_eq!(a.metrics.no_route.get(), 1);
}

#[tokio::test]
async fn forwarded_headers_reach_the_backend() {
    let a = activator().await;
    let (pod, seen) = backend("shop").await;
    a.route("shop", &[("service", "shop")], vec![pod]);
    get(&client(), a.addr, "shop.example.com:8080", "/").await;
    let headers = seen.last_headers.lock().unwrap().clone().unwrap();
    assert_eq!(headers["x-forwarded-for"], "127.0.0.1");
    assert_eq!(headers["x-forwarded-host"], "shop.example.com:8080");
    assert_eq!(headers["x-forwarded-proto"], "http");
    assert_eq!(headers["host"], "shop.example.com:8080");
}

#[tokio::test]
async fn forged_forwarding_headers_of_a_client_are_overwritten_on_both_paths() {
    // No --trusted-proxies (the default): nobody may tell the pod who the client is.
    let a = activator().await;
    let (pod, seen) = backend("shop").await;
    a.route("shop", &[("service", "shop")], vec![pod]);
    for request in FORGED {
        let answer = exchange(a.addr, request).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let expected = [
            ("x-forwarded-for", vec!["127.0.0.1"]),
            ("x-forwarded-host", vec!["shop.example.com"]),
            ("x-forwarded-proto", vec!["http"]),
            ("forwarded", vec![]),
        ]
        .map(|(n, v)| (n.to_owned(), v.into_iter().map(str::to_owned).collect()));
        assert_eq!(
            forwarding(&seen),
            expected,
            "{}",
            String::from_utf8_lossy(request)
        );
    }
}

#[tokio::test]
async fn a_trusted_proxys_forwarding_headers_are_kept_and_its_chain_extended_on_both_paths() {
    let a = activator_trusting(
        Limits::default(),
        DEFAULT_HELD_MEMORY,
        TrustedProxies::parse("127.0.0.0/8").unwrap(),
    )
    .await;
    let (pod, seen) = backend("shop").await;
    a.route("shop", &[("service", "shop")], vec![pod]);
    for request in FORGED {
        let answer = exchange(a.addr, request).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let expected = [
            ("x-forwarded-for", vec!["203.0.113.7, 127.0.0.1"]),
            ("x-forwarded-host", vec!["admin.internal"]),
            ("x-forwarded-proto", vec!["https"]),
            (
                "forwarded",
                vec!["for=203.0.113.7;host=admin.internal;proto=https"],
            ),
        ]
        .map(|(n, v)| (n.to_owned(), v.into_iter().map(str::to_owned).collect()));
        assert_eq!(
            forwarding(&seen),
            expected,
            "{}",
            String::from_utf8_lossy(request)
        );
    }
}

#[tokio::test]
async fn every_x_forwarded_for_line_of_a_trusted_proxy_reaches_the_pod_with_this_hop_appended() {
    let a = activator_trusting(
        Limits::default(),
        DEFAULT_HELD_MEMORY,
        TrustedProxies::parse("127.0.0.1").unwrap(),
    )
    .await;
    let (pod, seen) = backend("shop").await;
    a.route("shop", &[("service", "shop")], vec![pod]);
    // A GET (served by the front path) and a POST with a body (hyper's server), each behind
    // a proxy that appended its own line instead of extending the first.
    let requests: [&[u8]; 2] = [
        b"GET / HTTP/1.1\r\nHost: shop.example.com\r\nX-Forwarded-For: 203.0.113.7\r\n\
          X-Forwarded-For: 198.51.100.1, 192.0.2.5\r\nConnection: close\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nHost: shop.example.com\r\nX-Forwarded-For: 203.0.113.7\r\n\
          X-Forwarded-For: 198.51.100.1, 192.0.2.5\r\nContent-Length: 2\r\n\
          Connection: close\r\n\r\nhi",
    ];
    for request in requests {
        let answer = exchange(a.addr, request).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let headers = seen.last_headers.lock().unwrap().clone().unwrap();
        let lines: Vec<_> = headers.get_all("x-forwarded-for").iter().collect();
        assert_eq!(
            lines,
            ["203.0.113.7, 198.51.100.1, 192.0.2.5, 127.0.0.1"],
            "{}",
            String::from_utf8_lossy(request)
        );
    }
}

#[tokio::test]
async fn an_absolute_form_request_reaches_the_pod_with_the_host_it_was_routed_by() {
    let a = activator().await;
    let (pod, seen) = backend("shop").await;
    a.route(
        "shop",
        &[("service", "shop"), ("hosts", "shop.example.com")],
        vec![pod],
    );
    // Routed by the target's authority (RFC 9112 3.2.2), whatever Host says.
    let answer = exchange(
        a.addr,
        b"GET http://shop.example.com/cart HTTP/1.1\r\nHost: other.example.org\r\n\
          Connection: close\r\n\r\n",
    )
    .await;
    assert!(answer.ends_with("hello from shop"), "{answer}");
    let headers = seen.last_headers.lock().unwrap().clone().unwrap();
    assert_eq!(headers["host"], "shop.example.com");
    assert_eq!(headers["x-forwarded-host"], "shop.example.com");
    let uri = seen.last_uri.lock().unwrap().clone().unwrap();
    assert_eq!(uri.to_string(), "/cart");
}

#[tokio::test]
async fn http2_requests_reach_the_pod_in_origin_form_with_a_host_header() {
    let a = activator().await;
    let (pod, seen) = backend("shop").await;
    a.route("shop", &[("service", "shop")], vec![pod]);
    let h2 = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let request = http::Request::get(format!("http://{}/cart?item=7", a.addr))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let response = within(10, "h2 answer", h2.request(request)).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.version(), http::Version::HTTP_2);
    let uri = seen.last_uri.lock().unwrap().clone().unwrap();
    assert_eq!(uri.to_string(), "/cart?item=7");
    let headers = seen.last_headers.lock().unwrap().clone().unwrap();
    assert_eq!(headers["host"], a.addr.to_string().as_str());
    assert_eq!(headers["x-forwarded-host"], a.addr.to_string().as_str());
}
