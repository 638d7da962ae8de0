//! Connections open per peer address (`--max-connections-per-address`): a
//! client, or a host, cannot take every connection slot by itself. An IPv6
//! address counts by its /64, as the sign-in throttle keys it
//! (`login::throttle::key`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// The open connections of each address.
#[derive(Debug)]
pub struct PerAddress {
    max: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection's place in its address's count, given back when dropped.
#[derive(Debug)]
pub struct AddressSlot {
    table: Arc<PerAddress>,
    key: IpAddr,
}

impl PerAddress {
    /// At most `max` connections from one address.
    pub fn new(max: usize) -> Arc<PerAddress> {
        Arc::new(PerAddress {
            max,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A slot for a connection from `ip`; `None` when its address has
    /// `max` open.
    pub fn take(self: &Arc<Self>, ip: IpAddr) -> Option<AddressSlot> {
        let key = crate::guard::login::throttle::key(ip);
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(key).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(AddressSlot {
            table: self.clone(),
            key,
        })
    }

    #[cfg(test)]
    /// Connections open from `ip`'s address.
    pub fn open(&self, ip: IpAddr) -> usize {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.get(&crate::guard::login::throttle::key(ip))
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self.table.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_gets_its_share_and_gives_it_back() {
        let t = PerAddress::new(2);
        let a: IpAddr = "127.0.0.2".parse().expect("ip");
        let b: IpAddr = "127.0.0.3".parse().expect("ip");
        let one = t.take(a).expect("first");
        let _two = t.take(a).expect("second");
        assert!(t.take(a).is_none(), "a third from the same address");
        assert!(t.take(b).is_some(), "another address has its own share");
        drop(one);
        assert_eq!(t.open(a), 1);
        assert!(t.take(a).is_some(), "room again once one closed");
        let v6: IpAddr = "2001:db8::1".parse().expect("ip");
        let same_64: IpAddr = "2001:db8::2".parse().expect("ip");
        let _x = t.take(v6).expect("v6");
        let _y = t.take(same_64).expect("v6 /64");
        assert!(t.take(v6).is_none(), "a /64 shares one count");
    }
}
