//! Holding requests while a target has no ready pod, and the failures a client sees.

use super::*;

#[tokio::test]
async fn a_502_names_the_target_but_not_the_pod_on_both_paths() {
    let a = activator().await;
    // A pod that reads a request head and closes the connection without answering.
    let (pod, _) = raw_pod(|mut stream| async move {
        let _ = read_head(&mut stream).await;
    })
    .await;
    a.route("shop", &[("service", "shop")], vec![pod]);
    let requests: [&[u8]; 2] = [
        b"GET / HTTP/1.1\r\nHost: shop.example.com\r\nConnection: close\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: shop.example.com\r\nContent-Length: 2\r\n\
          Connection: close\r\n\r\nhi",
    ];
    for request in requests {
        let answer = exchange(a.addr, request).await;
        assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
        assert!(answer.contains("\"target\":\"shop/shop\""), "{answer}");
        assert!(
            !answer.contains(&pod.to_string()) && !answer.contains("127.0.0.1"),
            "the pod's address reached the client: {answer}"
        );
    }
}

#[tokio::test]
async fn a_full_queue_answers_503_and_held_requests_complete_when_a_pod_is_ready() {
    let a = activator().await;
    let (pod, _) = backend("shop").await;
    let cfg = config("shop", &[("service", "shop"), ("queueDepth", "2")]);
    let key = cfg.key.clone();
    a.targets.apply(vec![cfg]);
    let target = a.targets.get(&key).unwrap();
    let c = client();
    let held: Vec<_> = (0..2)
        .map(|_| {
            let c = c.clone();
            let addr = a.addr;
            tokio::spawn(async move { get(&c, addr, "shop.example.com", "/").await })
        })
        .collect();
    eventually("two held requests", || target.held() == 2).await;
    let (status, body) = get(&c, a.addr, "shop.example.com", "/").await;
    assert_eq!(status, 503);
    assert!(
        body.contains("\"target\":\"shop/shop\"") && body.contains("queue"),
        "{body}"
    );
    assert_eq!(target.metrics().queue_overflows.get(), 1);
    a.targets.set_ready(&key, vec![pod]);
    for h in held {
        assert_eq!(
            within(10, "held request", h).await.unwrap(),
            (200, "hello from shop".into())
        );
    }
}

#[tokio::test]
async fn a_held_client_that_disconnects_gives_up_its_place_in_the_queue() {
    let a = activator().await;
    let (pod, seen) = backend("shop").await;
    let key = a.route("shop", &[("service", "shop"), ("queueDepth", "1")], vec![]);
    let target = a.targets.get(&key).unwrap();
    let mut gone = TcpStream::connect(a.addr).await.unwrap();
    gone.write_all(b"GET / HTTP/1.1\r\nHost: shop.example.com\r\n\r\n")
        .await
        .unwrap();
    eventually("the request to be held", || target.held() == 1).await;
    drop(gone);
    eventually("the place to be given up", || target.held() == 0).await;
    // The one place is free again, and a pod that turns ready never sees the request.
    let c = client();
    let addr = a.addr;
    let next = tokio::spawn(async move { get(&c, addr, "shop.example.com", "/").await });
    eventually("the next request to be held", || target.held() == 1).await;
    a.targets.set_ready(&key, vec![pod]);
    assert_eq!(
        within(10, "the next answer", next).await.unwrap(),
        (200, "hello from shop".into())
    );
    assert_eq!(seen.requests.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_request_held_past_the_hold_timeout_gets_504() {
    let a = activator().await;
    let cfg = config("shop", &[("service", "shop"), ("holdTimeout", "200ms")]);
    let key = cfg.key.clone();
    a.targets.apply(vec![cfg]);
    let (status, body) = get(&client(), a.addr, "shop.example.com", "/").await;
    assert_eq!(status, 504);
    assert!(
        body.contains("\"error\":\"hold_timeout\"") && body.contains("shop/shop"),
        "{body}"
    );
    let target = a.targets.get(&key).unwrap();
    assert_eq!(target.metrics().hold_timeouts.get(), 1);
    assert_eq!(target.held(), 0);
}

#[tokio::test]
async fn a_backend_that_dies_mid_request_gives_502_without_hanging_the_client() {
    let a = activator().await;
    // A backend that reads the request and closes the connection without answering.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let pod = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf).await;
            drop(stream);
        }
    });
    let key = a.route("shop", &[("service", "shop")], vec![pod]);
    let (status, body) = within(10, "502", get(&client(), a.addr, "shop.example.com", "/")).await;
    assert_eq!(status, 502);
    assert!(body.contains("\"error\":\"upstream_error\""), "{body}");
    assert_eq!(
        a.targets.get(&key).unwrap().metrics().upstream_errors.get(),
        1
    );
}

#[tokio::test]
async fn a_client_that_disconnects_frees_its_slot_and_cancels_the_upstream_request() {
    let a = activator().await;
    let (pod, seen) = backend("shop").await;
    let key = a.route(
        "shop",
        &[("service", "shop"), ("containerConcurrency", "1")],
        vec![pod],
    );
    let target = a.targets.get(&key).unwrap();
    // The first request takes the only slot and hangs at the backend.
    let mut hanging = TcpStream::connect(a.addr).await.unwrap();
    hanging
        .write_all(b"GET /hang HTTP/1.1\r\nHost: shop.example.com\r\n\r\n")
        .await
        .unwrap();
    eventually("the backend to see the request", || {
        seen.requests.load(Ordering::SeqCst) == 1
    })
    .await;
    // The second waits for the slot.
    let c = client();
    let addr = a.addr;
    let second = tokio::spawn(async move { get(&c, addr, "shop.example.com", "/").await });
    eventually("the second request to be held", || target.held() == 1).await;
    drop(hanging);
    assert_eq!(
        within(10, "second request", second).await.unwrap(),
        (200, "hello from shop".into())
    );
    eventually("the upstream request to be cancelled", || {
        seen.cancelled.load(Ordering::SeqCst) == 1
    })
    .await;
}
