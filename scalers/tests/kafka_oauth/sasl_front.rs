//! The SASL/OAUTHBEARER front the tests put before tansu: it answers the Kafka handshake
//! itself, checks the bearer token (an admin JWT, or an MSK IAM presigned URL verified with the
//! key the test gave), then relays the connection to the broker.

use super::*;

pub(super) const API_VERSIONS: i16 = 18;
pub(super) const SASL_HANDSHAKE: i16 = 17;
pub(super) const SASL_AUTHENTICATE: i16 = 36;
pub(super) const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
pub(super) const SASL_AUTHENTICATION_FAILED: i16 = 58;
pub(super) const ADMIN_PRINCIPAL: &str = "test-admin";

/// Decodes unpadded base64url.
pub(super) fn base64url_decode(text: &str) -> Option<Vec<u8>> {
    const ALPHABET: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let (mut bits, mut count, mut out) = (0u32, 0, Vec::new());
    for c in text.chars() {
        bits = (bits << 6) | u32::try_from(ALPHABET.find(c)?).ok()?;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push(u8::try_from(bits >> count).ok()?);
            bits &= (1 << count) - 1;
        }
    }
    Some(out)
}

/// Whether `token` is librdkafka's unsecured JWT for [`ADMIN_PRINCIPAL`] (the tests' own
/// writer).
pub(super) fn is_admin_jwt(token: &str) -> bool {
    let mut parts = token.split('.');
    let (Some(_), Some(payload)) = (parts.next(), parts.next()) else {
        return false;
    };
    base64url_decode(payload)
        .and_then(|json| serde_json::from_slice::<serde_json::Value>(&json).ok())
        .is_some_and(|claims| claims["sub"] == ADMIN_PRINCIPAL)
}

/// What the front accepts and saw.
#[derive(Default)]
pub(super) struct FrontState {
    /// Tokens that authenticate (besides the admin JWT).
    pub(super) accepted: Mutex<HashSet<String>>,
    /// Every token presented by a client other than the admin, in order.
    pub(super) presented: Mutex<Vec<String>>,
    /// The extensions of every client-first message (`key=value`).
    pub(super) extensions: Mutex<Vec<String>>,
    /// Authentications refused.
    pub(super) refused: Mutex<usize>,
    /// Connections closed for a request before authentication.
    pub(super) unauthenticated_requests: Mutex<usize>,
    /// When set (access key id, secret key, region), tokens are checked as MSK IAM tokens:
    /// the signature recomputed as MSK does, instead of looked up in `accepted`.
    pub(super) msk: Mutex<Option<(String, String, String)>>,
}

/// Whether `token` is an MSK IAM token signed by `key_id`/`secret` for `region`: the
/// presigned URL's signature recomputed from its own query (AWS Signature Version 4, query
/// form, payload hash of the empty body), its action, host and key checked.
pub(super) fn valid_msk_token(token: &str, key_id: &str, secret: &str, region: &str) -> bool {
    use hmac::Mac;
    use keda_scalers::aws::sigv4;
    let Some(url) = base64url_decode(token)
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| url::Url::parse(&s).ok())
    else {
        return false;
    };
    let pairs: Vec<(String, String)> = url
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let get = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let (Some(action), Some(credential), Some(date), Some(signature)) = (
        get("Action"),
        get("X-Amz-Credential"),
        get("X-Amz-Date"),
        get("X-Amz-Signature"),
    ) else {
        return false;
    };
    let host = format!("kafka.{region}.amazonaws.com");
    if action != "kafka-cluster:Connect"
        || url.host_str() != Some(host.as_str())
        || !credential.starts_with(&format!("{key_id}/"))
        || !credential.ends_with(&format!("/{region}/kafka-cluster/aws4_request"))
    {
        return false;
    }
    let Ok(at) = jiff::civil::DateTime::strptime("%Y%m%dT%H%M%SZ", &date)
        .and_then(|d| d.to_zoned(jiff::tz::TimeZone::UTC))
        .map(|z| z.timestamp())
    else {
        return false;
    };
    let mut signed: Vec<(String, String)> = pairs
        .iter()
        .filter(|(k, _)| k != "X-Amz-Signature" && k != "User-Agent")
        .map(|(k, v)| (sigv4::uri_encode(k), sigv4::uri_encode(v)))
        .collect();
    signed.sort();
    let query = signed
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    let canonical = format!(
        "GET\n/\n{query}\nhost:{host}\n\nhost\n\
         e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    let scope = sigv4::Scope {
        region,
        service: "kafka-cluster",
    };
    let to_sign = sigv4::string_to_sign(at, scope, &canonical);
    let key = sigv4::signing_key(secret, at, scope);
    let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key) else {
        return false;
    };
    mac.update(to_sign.as_bytes());
    sigv4::hex(&mac.finalize().into_bytes()) == signature
}

/// The SASL/OAUTHBEARER front of one tansu (see the module docs).
pub(super) struct SaslFront {
    pub(super) addr: SocketAddr,
    pub(super) state: Arc<FrontState>,
    pub(super) task: tokio::task::JoinHandle<()>,
}

impl Drop for SaslFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub(super) async fn read_frame<S: AsyncRead + Unpin>(stream: &mut S) -> Option<Vec<u8>> {
    let size = stream.read_i32().await.ok()?;
    let size = usize::try_from(size).ok().filter(|s| *s <= 100 << 20)?;
    let mut frame = vec![0; size];
    stream.read_exact(&mut frame).await.ok()?;
    Some(frame)
}

pub(super) async fn write_frame<S: AsyncWrite + Unpin>(stream: &mut S, frame: &[u8]) -> Option<()> {
    stream
        .write_i32(i32::try_from(frame.len()).ok()?)
        .await
        .ok()?;
    stream.write_all(frame).await.ok()?;
    stream.flush().await.ok()
}

/// A request header v1: api key, version, correlation id, and where the body starts.
pub(super) fn header(frame: &[u8]) -> Option<(i16, i16, i32, usize)> {
    let key = i16::from_be_bytes(frame.get(0..2)?.try_into().ok()?);
    let version = i16::from_be_bytes(frame.get(2..4)?.try_into().ok()?);
    let correlation = i32::from_be_bytes(frame.get(4..8)?.try_into().ok()?);
    let client_id = i16::from_be_bytes(frame.get(8..10)?.try_into().ok()?);
    let body = 10 + usize::try_from(client_id.max(0)).ok()?;
    Some((key, version, correlation, body))
}

/// The `auth` and extensions of an RFC 7628 client-first message.
pub(super) fn client_first(message: &[u8]) -> Option<(String, Vec<String>)> {
    let text = std::str::from_utf8(message).ok()?;
    let rest = text.strip_prefix("n,")?;
    let (_, kvpairs) = rest.split_once(",\u{1}")?;
    let kvpairs = kvpairs.strip_suffix("\u{1}\u{1}")?;
    let mut auth = None;
    let mut extensions = Vec::new();
    for pair in kvpairs.split('\u{1}') {
        match pair.split_once('=') {
            Some(("auth", value)) => auth = Some(value.strip_prefix("Bearer ")?.to_string()),
            Some(_) => extensions.push(pair.to_string()),
            None => return None,
        }
    }
    Some((auth?, extensions))
}

impl SaslFront {
    /// A front on a free loopback port relaying to `upstream` (set later with the returned
    /// sender, since tansu must know the front's port first), with TLS when `tls` is given.
    pub(super) async fn start(
        upstream: Arc<Mutex<Option<SocketAddr>>>,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(FrontState::default());
        let task = {
            let state = Arc::clone(&state);
            tokio::spawn(async move {
                let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let state = Arc::clone(&state);
                    let upstream = *upstream.lock().expect("upstream");
                    let acceptor = acceptor.clone();
                    tokio::spawn(async move {
                        let Some(upstream) = upstream else { return };
                        match acceptor {
                            Some(acceptor) => {
                                if let Ok(stream) = acceptor.accept(stream).await {
                                    serve(stream, upstream, state).await;
                                }
                            }
                            None => serve(stream, upstream, state).await,
                        }
                    });
                }
            })
        };
        Self { addr, state, task }
    }
}

/// One client connection: SASL first, then a byte relay to tansu.
pub(super) async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut client: S,
    upstream: SocketAddr,
    state: Arc<FrontState>,
) {
    let Ok(mut broker) = TcpStream::connect(upstream).await else {
        return;
    };
    let mut mechanism_ok = false;
    loop {
        let Some(frame) = read_frame(&mut client).await else {
            return;
        };
        let Some((key, version, correlation, body)) = header(&frame) else {
            return;
        };
        match key {
            API_VERSIONS => {
                // Relayed: tansu advertises SaslHandshake 0-1 and SaslAuthenticate 0-2.
                if write_frame(&mut broker, &frame).await.is_none() {
                    return;
                }
                let Some(answer) = read_frame(&mut broker).await else {
                    return;
                };
                if write_frame(&mut client, &answer).await.is_none() {
                    return;
                }
            }
            SASL_HANDSHAKE if version == 1 => {
                let len = frame
                    .get(body..body + 2)
                    .map(|b| i16::from_be_bytes([b[0], b[1]]))
                    .unwrap_or(-1);
                let mechanism = usize::try_from(len)
                    .ok()
                    .and_then(|len| frame.get(body + 2..body + 2 + len))
                    .unwrap_or_default();
                mechanism_ok = mechanism == b"OAUTHBEARER";
                let mut answer = correlation.to_be_bytes().to_vec();
                let error = if mechanism_ok {
                    0
                } else {
                    UNSUPPORTED_SASL_MECHANISM
                };
                answer.extend_from_slice(&error.to_be_bytes());
                answer.extend_from_slice(&1i32.to_be_bytes());
                answer.extend_from_slice(&11i16.to_be_bytes());
                answer.extend_from_slice(b"OAUTHBEARER");
                if write_frame(&mut client, &answer).await.is_none() || !mechanism_ok {
                    return;
                }
            }
            SASL_AUTHENTICATE if mechanism_ok && (0..=1).contains(&version) => {
                let len = frame
                    .get(body..body + 4)
                    .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
                    .unwrap_or(-1);
                let message = usize::try_from(len)
                    .ok()
                    .and_then(|len| frame.get(body + 4..body + 4 + len))
                    .unwrap_or_default();
                let verdict = client_first(message).map(|(token, extensions)| {
                    if is_admin_jwt(&token) {
                        return true;
                    }
                    state
                        .presented
                        .lock()
                        .expect("presented")
                        .push(token.clone());
                    state
                        .extensions
                        .lock()
                        .expect("extensions")
                        .extend(extensions);
                    match state.msk.lock().expect("msk").as_ref() {
                        Some((key_id, secret, region)) => {
                            valid_msk_token(&token, key_id, secret, region)
                        }
                        None => state.accepted.lock().expect("accepted").contains(&token),
                    }
                });
                let ok = verdict == Some(true);
                let mut answer = correlation.to_be_bytes().to_vec();
                if ok {
                    answer.extend_from_slice(&0i16.to_be_bytes());
                    answer.extend_from_slice(&(-1i16).to_be_bytes());
                } else {
                    *state.refused.lock().expect("refused") += 1;
                    let text = b"Authentication failed: invalid token";
                    answer.extend_from_slice(&SASL_AUTHENTICATION_FAILED.to_be_bytes());
                    answer.extend_from_slice(
                        &i16::try_from(text.len()).expect("short").to_be_bytes(),
                    );
                    answer.extend_from_slice(text);
                }
                answer.extend_from_slice(&0i32.to_be_bytes());
                if version >= 1 {
                    answer.extend_from_slice(&0i64.to_be_bytes());
                }
                if write_frame(&mut client, &answer).await.is_none() || !ok {
                    return;
                }
                let _ = tokio::io::copy_bidirectional(&mut client, &mut broker).await;
                return;
            }
            _ => {
                // Kafka closes a connection that sends anything else before authenticating.
                *state
                    .unauthenticated_requests
                    .lock()
                    .expect("unauthenticated") += 1;
                return;
            }
        }
    }
}
