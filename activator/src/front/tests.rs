use super::*;

/// A trusted proxy (`--trusted-proxies`): its forwarding headers are kept.
fn peer() -> Peer {
    Peer::with_trust("127.0.0.9:5555".parse().expect("an address"), true)
}

#[test]
fn the_pods_head_is_the_clients_lines_without_hop_by_hop_ones_and_with_forwarded_ones() {
    let request = b"GET /cart?id=7 HTTP/1.1\r\n\
        Host: shop.example.com:8080\r\n\
        Connection: keep-alive, X-Secret-Hop\r\n\
        X-Secret-Hop: 1\r\n\
        Keep-Alive: timeout=5\r\n\
        TE: trailers\r\n\
        X-Forwarded-For: 203.0.113.7\r\n\
        X-Forwarded-For: 198.51.100.1\r\n\
        Content-Length: 0\r\n\
        X-App: kept\r\n\r\n";
    let mut head = Vec::new();
    let Parsed::Request(parsed) = parse(request, &peer(), &mut head) else {
        panic!("a simple GET is this path's");
    };
    assert_eq!(parsed.len, request.len());
    assert_eq!(parsed.method, Method::GET);
    assert_eq!(parsed.host, "shop.example.com:8080");
    assert_eq!(parsed.path, "/cart");
    assert!(!parsed.close);
    assert_eq!(
        String::from_utf8(head).expect("ASCII"),
        "GET /cart?id=7 HTTP/1.1\r\n\
         Host: shop.example.com:8080\r\n\
         X-Forwarded-For: 203.0.113.7, 198.51.100.1, 127.0.0.9\r\n\
         Content-Length: 0\r\n\
         X-App: kept\r\n\
         x-forwarded-host: shop.example.com:8080\r\n\
         x-forwarded-proto: http\r\n\r\n"
    );
}

#[test]
fn forwarded_headers_a_trusted_proxy_sent_are_kept() {
    let request = b"DELETE /x HTTP/1.1\r\nhost: a\r\nx-forwarded-host: b\r\n\
        x-forwarded-proto: https\r\nconnection: close\r\n\r\n";
    let mut head = Vec::new();
    let Parsed::Request(parsed) = parse(request, &peer(), &mut head) else {
        panic!("a DELETE without a body is this path's");
    };
    assert!(parsed.close);
    assert_eq!(
        String::from_utf8(head).expect("ASCII"),
        "DELETE /x HTTP/1.1\r\nhost: a\r\nx-forwarded-host: b\r\n\
         x-forwarded-proto: https\r\nx-forwarded-for: 127.0.0.9\r\n\r\n"
    );
}

#[test]
fn requests_this_path_does_not_serve_go_to_hyper_and_partial_heads_wait() {
    let handed_over: &[&[u8]] = &[
        b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nping",
        b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        b"GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: h2c\r\n\r\n",
        b"PUT /x HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n",
        b"GET /x HTTP/1.0\r\nHost: a\r\n\r\n",
        b"GET http://a/x HTTP/1.1\r\nHost: a\r\n\r\n",
        b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n",
        b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        b"GET /x HTTP/1.1\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        b"GET /a|b HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET /x#frag HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost a\r\n\r\n",
    ];
    for request in handed_over {
        let mut head = Vec::new();
        assert!(
            matches!(parse(request, &peer(), &mut head), Parsed::HandOver),
            "{}",
            String::from_utf8_lossy(request)
        );
    }
    let mut head = Vec::new();
    let many: Vec<u8> = [
        &b"GET /x HTTP/1.1\r\nHost: a\r\n"[..],
        &b"X-A: 1\r\n".repeat(MAX_HEADERS),
        b"\r\n",
    ]
    .concat();
    assert!(matches!(parse(&many, &peer(), &mut head), Parsed::HandOver));
    for partial in [&b""[..], b"GE", b"GET /x HTTP/1.1\r\nHost: a\r\n"] {
        assert!(matches!(
            parse(partial, &peer(), &mut head),
            Parsed::Partial
        ));
    }
}

#[test]
fn response_heads_say_how_the_body_ends() {
    let mut with_length = HeaderMap::new();
    with_length.insert(header::CONTENT_LENGTH, "5".parse().expect("a value"));
    let cases = [
        (Method::GET, StatusCode::OK, &with_length, Framing::Passed),
        (
            Method::GET,
            StatusCode::OK,
            &HeaderMap::new(),
            Framing::Chunked,
        ),
        (Method::HEAD, StatusCode::OK, &with_length, Framing::None),
        (
            Method::HEAD,
            StatusCode::OK,
            &HeaderMap::new(),
            Framing::None,
        ),
        (
            Method::GET,
            StatusCode::NO_CONTENT,
            &HeaderMap::new(),
            Framing::None,
        ),
        (
            Method::GET,
            StatusCode::NOT_MODIFIED,
            &with_length,
            Framing::None,
        ),
    ];
    for (method, status, headers, framing) in cases {
        assert_eq!(
            Framing::of(&method, status, headers),
            framing,
            "{method} {status}"
        );
    }
    let mut out = Vec::new();
    let mut dated = with_length.clone();
    dated.insert(
        header::DATE,
        "Sun, 22 Nov 2026 19:00:00 GMT".parse().expect("a value"),
    );
    encode_response_head(&dated, StatusCode::OK, Framing::Passed, true, &mut out);
    assert_eq!(
        String::from_utf8(out).expect("ASCII"),
        "HTTP/1.1 200 OK\r\ncontent-length: 5\r\ndate: Sun, 22 Nov 2026 19:00:00 GMT\r\n\
         connection: close\r\n\r\n"
    );
    let mut out = Vec::new();
    encode_response_head(
        &HeaderMap::new(),
        StatusCode::BAD_GATEWAY,
        Framing::Length(2),
        false,
        &mut out,
    );
    let head = String::from_utf8(out).expect("ASCII");
    assert!(
        head.starts_with("HTTP/1.1 502 Bad Gateway\r\ndate: "),
        "{head}"
    );
    assert!(
        head.ends_with(" GMT\r\ncontent-length: 2\r\n\r\n"),
        "{head}"
    );
}
