use super::*;
use http_body_util::BodyExt;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

/// A pod that reads one request head and answers `answer` byte for byte, in pieces of
/// `piece` bytes (paced, so the client sees partial heads and bodies). Then it closes the
/// connection if `close`, else holds it open until the client closes it: a body whose
/// framing wrongly waited for the end of the stream would never end. Returns its address.
async fn pod(answer: &'static [u8], piece: usize, close: bool) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut request = Vec::new();
        let mut byte = [0u8; 1];
        while !request.ends_with(b"\r\n\r\n") {
            assert_eq!(stream.read(&mut byte).await.unwrap(), 1);
            request.push(byte[0]);
        }
        for part in answer.chunks(piece) {
            stream.write_all(part).await.unwrap();
            stream.flush().await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        if !close {
            let _ = stream.read_to_end(&mut Vec::new()).await;
        }
    });
    addr
}

fn get(path: &str) -> (Parts, Vec<u8>) {
    let (parts, ()) = http::Request::get(path)
        .header("host", "shop.example.com")
        .header("x-forwarded-for", "10.0.0.1")
        .body(())
        .unwrap()
        .into_parts();
    let mut head = Vec::new();
    encode_head(&parts, &mut head);
    (parts, head)
}

/// Sends a GET-like request with `method` to a [`pod`] answering `answer` and reads the
/// whole response: head, body bytes, trailers, and whether the connection can be kept.
async fn fetch(
    answer: &'static [u8],
    piece: usize,
    method: Method,
) -> Result<(Response<()>, Bytes, Option<HeaderMap>, bool), WireError> {
    fetch_from(pod(answer, piece, false).await, method).await
}

async fn fetch_from(
    addr: SocketAddr,
    method: Method,
) -> Result<(Response<()>, Bytes, Option<HeaderMap>, bool), WireError> {
    let (_, head) = get("/cart?item=7");
    let response = Conn::connect(addr).await?.exchange(&head, &method).await?;
    let (parts, mut body) = response.into_parts();
    let mut data = BytesMut::new();
    let mut trailers = None;
    let read = async {
        while let Some(frame) = body.frame().await {
            match frame?.into_data() {
                Ok(bytes) => data.extend_from_slice(&bytes),
                Err(frame) => trailers = frame.into_trailers().ok(),
            }
        }
        Ok::<_, WireError>(())
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), read)
        .await
        .expect("the body never ended: its framing waits for the pod to close")?;
    let reusable = body.into_idle().is_some();
    Ok((
        Response::from_parts(parts, ()),
        data.freeze(),
        trailers,
        reusable,
    ))
}

#[test]
fn a_request_head_is_written_in_origin_form_with_every_header() {
    let (_, head) = get("/cart?item=7");
    assert_eq!(
        String::from_utf8(head).unwrap(),
        "GET /cart?item=7 HTTP/1.1\r\nhost: shop.example.com\r\nx-forwarded-for: 10.0.0.1\r\n\r\n"
    );
}

#[tokio::test]
async fn a_content_length_body_is_read_exactly_and_the_connection_kept() {
    let (response, body, _, reusable) = fetch(
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-App: a\r\nX-App: b\r\n\r\nhello",
        3,
        Method::GET,
    )
    .await
    .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(&body[..], b"hello");
    let apps: Vec<_> = response.headers().get_all("x-app").iter().collect();
    assert_eq!(apps, ["a", "b"]);
    assert!(reusable);
}

#[tokio::test]
async fn a_chunked_body_is_decoded_with_extensions_and_trailers() {
    let (response, body, trailers, reusable) = fetch(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;name=v\r\nhello\r\n7\r\n, world\r\n0\r\nX-Checksum: 42\r\n\r\n",
        4,
        Method::GET,
    )
    .await
    .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(&body[..], b"hello, world");
    assert_eq!(trailers.unwrap()["x-checksum"], "42");
    assert!(reusable);
    // With both, Transfer-Encoding frames the body and Content-Length is dropped.
    let (response, body, _, _) = fetch(
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
        100,
        Method::GET,
    )
    .await
    .unwrap();
    assert_eq!(&body[..], b"ok");
    assert!(!response.headers().contains_key("content-length"));
}

#[tokio::test]
async fn interim_answers_are_skipped_and_head_204_and_304_have_no_body() {
    let (response, body, _, reusable) = fetch(
        b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        7,
        Method::GET,
    )
    .await
    .unwrap();
    assert_eq!(
        (response.status().as_u16(), &body[..], reusable),
        (200, &b"ok"[..], true)
    );
    // A HEAD answer's Content-Length describes the GET's body; none follows.
    let (response, body, _, reusable) = fetch(
        b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n",
        100,
        Method::HEAD,
    )
    .await
    .unwrap();
    assert_eq!(response.headers()["content-length"], "1000");
    assert!(body.is_empty() && reusable);
    for status in ["204 No Content", "304 Not Modified"] {
        let answer: &'static [u8] = format!("HTTP/1.1 {status}\r\nContent-Length: 7\r\n\r\n")
            .leak()
            .as_bytes();
        let (_, body, _, reusable) = fetch(answer, 100, Method::GET).await.unwrap();
        assert!(body.is_empty() && reusable, "{status}");
    }
}

#[tokio::test]
async fn an_unframed_body_ends_with_the_connection_which_is_not_kept() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 1024];
        let _ = stream.read(&mut buf).await.unwrap();
        stream
            .write_all(b"HTTP/1.1 200 OK\r\n\r\nall of it")
            .await
            .unwrap();
    });
    let (_, head) = get("/");
    let response = Conn::connect(addr)
        .await
        .unwrap()
        .exchange(&head, &Method::GET)
        .await
        .unwrap();
    let mut body = response.into_body();
    let mut data = Vec::new();
    while let Some(frame) = body.frame().await {
        data.extend_from_slice(&frame.unwrap().into_data().unwrap());
    }
    assert_eq!(data, b"all of it");
    assert!(body.into_idle().is_none());
}

#[tokio::test]
async fn connection_close_and_http_10_answers_are_not_kept() {
    for (answer, kept) in [
        (
            &b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"[..],
            false,
        ),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", false),
        (
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok",
            true,
        ),
    ] {
        let (_, _, _, reusable) = fetch(answer, 100, Method::GET).await.unwrap();
        assert_eq!(reusable, kept, "{answer:?}");
    }
}

#[tokio::test]
async fn broken_answers_are_errors_that_name_the_problem() {
    for (answer, expected) in [
        (
            &b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok"[..],
            "differing Content-Length",
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "bad Content-Length",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "bad chunk size",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokX\r\n",
            "CRLF",
        ),
        (b"SMTP ready\r\n\r\n", "invalid response"),
        (b"HTTP/1.1 101 Switching Protocols\r\n\r\n", "101"),
    ] {
        let error = fetch(answer, 100, Method::GET).await.unwrap_err();
        assert!(
            error.to_string().contains(expected),
            "{error} for {answer:?}"
        );
        assert!(!error.is_stale(), "{error}");
    }
}

#[tokio::test]
async fn a_body_cut_short_is_an_error_and_an_unanswered_request_is_stale() {
    // The pod closes the connection after half the promised body.
    let pod = pod(
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        100,
        true,
    )
    .await;
    let error = fetch_from(pod, Method::GET).await.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("in the middle of the response body"),
        "{error}"
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 1024];
        let _ = stream.read(&mut buf).await;
    });
    let (_, head) = get("/");
    let error = Conn::connect(addr)
        .await
        .unwrap()
        .exchange(&head, &Method::GET)
        .await
        .unwrap_err();
    assert!(error.is_stale(), "{error}");
}

#[tokio::test]
async fn an_idle_connection_the_pod_closed_is_not_usable() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (close_tx, close_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let _ = close_rx.await;
        drop(stream);
    });
    let conn = Conn::connect(addr).await.unwrap();
    assert!(conn.is_usable());
    close_tx.send(()).unwrap();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    while conn.is_usable() {
        assert!(tokio::time::Instant::now() < deadline, "still usable");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

#[test]
fn chunk_sizes_are_hex_with_optional_extensions() {
    assert_eq!(parse_chunk_size(b"1aF").unwrap(), 0x1af);
    assert_eq!(parse_chunk_size(b"10 ; x=1").unwrap(), 16);
    assert!(parse_chunk_size(b"").is_err());
    assert!(parse_chunk_size(b"12345678901234567").is_err());
    assert!(parse_chunk_size(b"g").is_err());
}
