//! The activator's request-head parser (`keda_activator::front::parse`): on any bytes it
//! answers "partial", "hand over to hyper" or a request; for a request, the pod's head it
//! writes is one complete HTTP/1.1 request head with the client's method, target and `Host`,
//! no hop-by-hop field, and one `X-Forwarded-For` ending with the client's address.
#![no_main]

use keda_activator::front::{Parsed, parse};
use keda_activator::proxy::Peer;
use libfuzzer_sys::fuzz_target;

const HOP_BY_HOP: &[&'static str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

fn check(data: &[u8], peer: &Peer, ip: &str) {
    let mut out = Vec::new();
    let Parsed::Request(request) = parse(data, peer, &mut out) else {
        return;
    };
    assert!(request.len > 0 && request.len <= data.len());
    // The client's head, as httparse reads it.
    let mut fields = [httparse::EMPTY_HEADER; 100];
    let mut client = httparse::Request::new(&mut fields);
    assert_eq!(
        client.parse(&data[..request.len]),
        Ok(httparse::Status::Complete(request.len))
    );
    let target = client.path.expect("a target");
    assert_eq!(target.split('?').next(), Some(request.path));
    // The pod's head.
    let mut pod_fields = [httparse::EMPTY_HEADER; 110];
    let mut pod = httparse::Request::new(&mut pod_fields);
    assert_eq!(
        pod.parse(&out),
        Ok(httparse::Status::Complete(out.len())),
        "the pod's head {:?}",
        String::from_utf8_lossy(&out)
    );
    assert_eq!(pod.method, Some(request.method.as_str()));
    assert_eq!(pod.path, Some(target));
    assert_eq!(pod.version, Some(1));
    let headers: &[httparse::Header<'_>] = pod.headers;
    let named = |name: &'static str| {
        headers
            .iter()
            .filter(move |f| f.name.eq_ignore_ascii_case(name))
    };
    let hosts: Vec<&[u8]> = named("host").map(|f| f.value).collect();
    assert_eq!(hosts, [request.host.as_bytes()]);
    for hop in HOP_BY_HOP {
        assert_eq!(named(hop).count(), 0, "{hop} sent to the pod");
    }
    let forwarded: Vec<&[u8]> = named("x-forwarded-for").map(|f| f.value).collect();
    assert_eq!(forwarded.len(), 1);
    assert!(forwarded[0].ends_with(ip.as_bytes()));
    assert!(named("x-forwarded-host").count() >= 1);
    assert!(named("x-forwarded-proto").count() >= 1);
}

fuzz_target!(|data: &[u8]| {
    check(
        data,
        &Peer::new(([192, 0, 2, 7], 40000).into()),
        "192.0.2.7",
    );
    check(
        data,
        &Peer::new((std::net::Ipv6Addr::LOCALHOST, 40000).into()),
        "::1",
    );
});
