//! Which peers may tell the pod who the client is: `--trusted-proxies`.
//!
//! A request's `X-Forwarded-For`, `X-Forwarded-Host`, `X-Forwarded-Proto` and `Forwarded`
//! headers are what a proxy in front of the activator says about the client. From anyone else
//! they are forgeries (a client that claims another address, an internal host or `https`), so
//! the activator keeps them only from a peer in one of the configured networks; from any other
//! peer it drops them and sets the three `X-Forwarded-*` headers itself. By default no peer is
//! trusted.

use std::net::IpAddr;

/// The networks whose peers' forwarding headers are kept. Empty (the default): none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    networks: Vec<(IpAddr, u8)>,
}

impl TrustedProxies {
    /// Whether `ip` is in one of the networks (an IPv4-mapped IPv6 address as its IPv4 one).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.networks
            .iter()
            .any(|&(network, bits)| match (network, ip) {
                (IpAddr::V4(n), IpAddr::V4(a)) => {
                    prefix(u128::from(n.to_bits()), u128::from(a.to_bits()), bits, 32)
                }
                (IpAddr::V6(n), IpAddr::V6(a)) => prefix(n.to_bits(), a.to_bits(), bits, 128),
                _ => false,
            })
    }

    /// Whether no peer is trusted.
    pub fn is_empty(&self) -> bool {
        self.networks.is_empty()
    }

    /// A comma-separated list of networks (`10.0.0.0/8`), or addresses (a `/32` or `/128`);
    /// empty for none.
    ///
    /// # Errors
    /// An entry that is not an address or a network; the message names it.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let mut networks = Vec::new();
        for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (addr, bits) = entry
                .split_once('/')
                .map_or((entry, None), |(a, b)| (a, Some(b)));
            let addr: IpAddr = addr.parse().map_err(|_| {
                format!("\"{entry}\" is not an IP address or a network such as 10.0.0.0/8")
            })?;
            let addr = addr.to_canonical();
            let max = if addr.is_ipv4() { 32 } else { 128 };
            let bits = match bits {
                None => max,
                Some(bits) => bits
                    .parse::<u8>()
                    .ok()
                    .filter(|b| *b <= max)
                    .ok_or_else(|| format!("\"{entry}\": the prefix length is not 0 to {max}"))?,
            };
            networks.push((addr, bits));
        }
        Ok(Self { networks })
    }
}

/// Whether the first `bits` of the `width`-bit numbers `network` and `addr` agree.
fn prefix(network: u128, addr: u128, bits: u8, width: u32) -> bool {
    let bits = u32::from(bits);
    if bits == 0 {
        return true;
    }
    let shift = width - bits;
    (network >> shift) == (addr >> shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_and_addresses_are_matched_by_prefix() {
        let t = TrustedProxies::parse(" 10.0.0.0/8, 192.0.2.7 ,fd00::/16").unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(t.contains(ip("10.200.0.1")));
        assert!(!t.contains(ip("11.0.0.1")));
        assert!(t.contains(ip("192.0.2.7")));
        assert!(!t.contains(ip("192.0.2.8")));
        assert!(t.contains(ip("fd00:1::1")));
        assert!(!t.contains(ip("fd01::1")));
        // IPv4 peers on a dual-stack socket.
        assert!(t.contains(ip("::ffff:10.1.2.3")));
        assert!(
            TrustedProxies::parse("0.0.0.0/0")
                .unwrap()
                .contains(ip("203.0.113.1"))
        );
        assert!(
            !TrustedProxies::parse("0.0.0.0/0")
                .unwrap()
                .contains(ip("::1"))
        );
        assert!(TrustedProxies::parse("").unwrap().is_empty());
        assert!(!TrustedProxies::default().contains(ip("127.0.0.1")));
        for bad in ["10.0.0.0/33", "fd00::/129", "example.com", "10.0.0.0/x"] {
            let error = TrustedProxies::parse(bad).unwrap_err();
            assert!(error.contains(bad), "{error}");
        }
    }
}
