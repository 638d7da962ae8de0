//! The connected clients, for GET_CLIENT(S) and GET_ME. A connection takes
//! the registry's lock twice: when it registers and when its
//! [`Registration`] drops. Signing in and out only stores the user in the
//! client's own atomic.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// Iggy's `TransportProtocol::Tcp` on the wire.
pub const TRANSPORT_TCP: u8 = 1;

/// What GET_CLIENT(S) says of `user` when nobody is signed in (as Iggy's
/// server does).
pub const NO_USER: u32 = u32::MAX;

/// One connected client.
#[derive(Debug)]
pub struct Client {
    /// Its id (from 1, not reused while the server runs).
    pub id: u32,
    /// The peer's address.
    pub address: String,
    /// Its transport ([`TRANSPORT_TCP`]).
    pub transport: u8,
    user: AtomicU32,
}

impl Client {
    /// The signed-in user's id, or [`NO_USER`].
    pub fn user(&self) -> u32 {
        self.user.load(Ordering::Relaxed)
    }

    /// Records who is signed in ([`NO_USER`] after a logout).
    pub fn set_user(&self, user: u32) {
        self.user.store(user, Ordering::Relaxed);
    }
}

/// Every connected client, by id.
#[derive(Debug, Default)]
pub struct Registry {
    next: AtomicU32,
    connected: Mutex<BTreeMap<u32, Arc<Client>>>,
}

/// A client's place in the registry; leaving drops it.
#[derive(Debug)]
pub struct Registration {
    clients: Arc<Registry>,
    client: Arc<Client>,
}

impl Registration {
    /// The registered client.
    pub fn client(&self) -> &Arc<Client> {
        &self.client
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut connected = self
            .clients
            .connected
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        connected.remove(&self.client.id);
    }
}

impl Registry {
    /// Registers a client connected from `address`.
    pub fn register(self: &Arc<Self>, address: String, transport: u8) -> Registration {
        let id = self.next.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        let client = Arc::new(Client {
            id,
            address,
            transport,
            user: AtomicU32::new(NO_USER),
        });
        let mut connected = self.connected.lock().unwrap_or_else(|p| p.into_inner());
        connected.insert(id, client.clone());
        drop(connected);
        Registration {
            clients: self.clone(),
            client,
        }
    }

    /// The connected clients, by id.
    pub fn list(&self) -> Vec<Arc<Client>> {
        let connected = self.connected.lock().unwrap_or_else(|p| p.into_inner());
        connected.values().cloned().collect()
    }

    /// The connected client `id`.
    pub fn get(&self, id: u32) -> Option<Arc<Client>> {
        let connected = self.connected.lock().unwrap_or_else(|p| p.into_inner());
        connected.get(&id).cloned()
    }

    /// How many are connected.
    pub fn count(&self) -> usize {
        let connected = self.connected.lock().unwrap_or_else(|p| p.into_inner());
        connected.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registration_lasts_as_long_as_the_connection() {
        let clients = Arc::new(Registry::default());
        let a = clients.register("127.0.0.1:1".into(), TRANSPORT_TCP);
        let b = clients.register("127.0.0.1:2".into(), TRANSPORT_TCP);
        assert_eq!((a.client().id, b.client().id), (1, 2));
        a.client().set_user(7);
        assert_eq!(clients.get(1).map(|c| c.user()), Some(7));
        assert_eq!(clients.get(2).map(|c| c.user()), Some(NO_USER));
        drop(a);
        assert!(clients.get(1).is_none());
        assert_eq!(clients.count(), 1);
    }
}
