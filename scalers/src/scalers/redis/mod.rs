//! The Redis scalers: lists (`redis`, `redis-cluster`, `redis-sentinel`) and streams
//! (`redis-streams`, `redis-cluster-streams`, `redis-sentinel-streams`). All share one pooled
//! connection per (topology, nodes, credentials, database, TLS settings).

pub mod connection;
pub mod list;
pub mod notify;
pub mod streams;
pub mod xread;

use crate::metadata::Param;

/// Every parameter of the list scalers (connection + list).
pub const LIST_PARAMS: &[Param] = &concat_params::<
    { connection::CONNECTION_PARAMS.len() + list::PARAMS.len() },
>(connection::CONNECTION_PARAMS, list::PARAMS);

/// Every parameter of the stream scalers (connection + stream).
pub const STREAMS_PARAMS: &[Param] = &concat_params::<
    { connection::CONNECTION_PARAMS.len() + streams::PARAMS.len() },
>(connection::CONNECTION_PARAMS, streams::PARAMS);

const fn concat_params<const N: usize>(a: &[Param], b: &[Param]) -> [Param; N] {
    let mut out = [Param::optional(""); N];
    let mut i = 0;
    while i < a.len() {
        out[i] = a[i];
        i += 1;
    }
    let mut j = 0;
    while j < b.len() {
        out[i + j] = b[j];
        j += 1;
    }
    out
}
